// Multicast over the CM: rdma_join_multicast attaches the id's UD QP to the
// group and reports the join at once (RoCE has no subnet administrator to
// ask); rdma_leave_multicast detaches.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

#include "common/export.h"
#include "rdmacm/cm.h"

namespace uroce::rdmacm {
namespace {

/// The MGID of a multicast IP address: ::ffff:a.b.c.d for IPv4, as the
/// kernel's CM forms it for RoCE v2; the IPv6 group itself.
bool mgid_of(const sockaddr* a, ibv_gid* mgid) {
  if (!a) return false;
  if (a->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(a);
    if (!IN_MULTICAST(ntohl(in->sin_addr.s_addr))) return false;
  } else if (a->sa_family == AF_INET6) {
    if (!IN6_IS_ADDR_MULTICAST(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr)) return false;
  } else {
    return false;
  }
  ip_to_gid(a, mgid);
  return true;
}

int join(rdma_cm_id* cm_id, const sockaddr* addr, bool send_only, void* context) {
  if (!cm_id || !cm_id->verbs) return fail(EINVAL);
  CmId* id = from(cm_id);
  ibv_gid mgid;
  if (!mgid_of(addr, &mgid)) return fail(EINVAL);
  for (const Group& g : id->groups)
    if (memcmp(&g.mgid, &mgid, sizeof(mgid)) == 0) return fail(EADDRINUSE);
  // A send-only member receives nothing: its QP is not attached.
  const bool attach = cm_id->qp && !send_only;
  if (attach && ibv_attach_mcast(cm_id->qp, &mgid, 0) != 0) return -1;
  id->groups.push_back(Group{mgid, attach});
  // Joined at once: RoCE has no subnet administrator to ask.
  auto* e = new Event();
  e->pub.id = cm_id;
  e->pub.event = RDMA_CM_EVENT_MULTICAST_JOIN;
  rdma_ud_param& p = e->pub.param.ud;
  p.private_data = context;  // where rdma-core hands back the join's context
  ibv_ah_attr& ah = p.ah_attr;
  ah.is_global = 1;
  ah.grh.dgid = mgid;
  ah.grh.sgid_index = uint8_t(id->gid_index);
  ah.grh.hop_limit = 1;
  ah.grh.traffic_class = id->tos;
  ah.port_num = cm_id->port_num;
  p.qp_num = 0xffffff;
  p.qkey = kUdpQkey;
  queue_event(cm_id->channel, e);
  return settle(id);
}

}  // namespace
}  // namespace uroce::rdmacm

using namespace uroce::rdmacm;

UROCE_EXPORT int rdma_join_multicast(rdma_cm_id* cm_id, sockaddr* addr, void* context) {
  return join(cm_id, addr, false, context);
}

UROCE_EXPORT int rdma_join_multicast_ex(rdma_cm_id* cm_id, rdma_cm_join_mc_attr_ex* attr, void* context) {
  if (!attr || !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) ||
      !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS))
    return fail(EINVAL);
  if (attr->join_flags != RDMA_MC_JOIN_FLAG_FULLMEMBER &&
      attr->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
    return fail(EINVAL);
  return join(cm_id, attr->addr, attr->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER, context);
}

UROCE_EXPORT int rdma_leave_multicast(rdma_cm_id* cm_id, sockaddr* addr) {
  if (!cm_id) return fail(EINVAL);
  CmId* id = from(cm_id);
  ibv_gid mgid;
  if (!mgid_of(addr, &mgid)) return fail(EINVAL);
  for (auto it = id->groups.begin(); it != id->groups.end(); ++it) {
    if (memcmp(&it->mgid, &mgid, sizeof(mgid)) != 0) continue;
    if (it->attached && cm_id->qp) ibv_detach_mcast(cm_id->qp, &mgid, 0);
    id->groups.erase(it);
    return 0;
  }
  return fail(EADDRNOTAVAIL);
}
