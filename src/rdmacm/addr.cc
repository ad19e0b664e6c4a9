// Addresses and routes: which device an IP address is on, rdma_bind_addr,
// rdma_resolve_addr, rdma_resolve_route, rdma_getaddrinfo, the port getters.
//
// A device "holds" an address when its GID table does (RoCE v2 GIDs are the
// interface's addresses, ::ffff:a.b.c.d for IPv4). The source address for a
// destination is the one the routing table picks (a connected UDP socket's
// getsockname, in the caller's network namespace). Unlike the kernel,
// 127.0.0.1 and ::1 resolve to uroce_lo, whose GID table holds them, so CM
// programs run on a machine with no network.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/export.h"
#include "rdmacm/cm.h"
#include "rdmacm/link.h"

namespace uroce::rdmacm {
namespace {

bool is_wildcard(const sockaddr* a) {
  if (a->sa_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr == INADDR_ANY;
  if (a->sa_family == AF_INET6)
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
  return false;
}

bool is_loopback(const sockaddr* a) {
  if (a->sa_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr) >> 24) == 127;
  if (a->sa_family == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
  return false;
}

in_port_t* port_of(sockaddr* a) {
  if (a->sa_family == AF_INET) return &reinterpret_cast<sockaddr_in*>(a)->sin_port;
  if (a->sa_family == AF_INET6) return &reinterpret_cast<sockaddr_in6*>(a)->sin6_port;
  return nullptr;
}

bool same_ip(const sockaddr* a, const sockaddr* b) {
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  return memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, 16) == 0;
}

/// True if some interface of this host (in this network namespace) has `a`.
bool host_has(const sockaddr* a) {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return false;
  bool found = false;
  for (ifaddrs* i = all; i && !found; i = i->ifa_next)
    if (i->ifa_addr && same_ip(i->ifa_addr, a)) found = true;
  freeifaddrs(all);
  return found;
}

/// The address the routing table gives as source towards `dst`.
int source_for(const sockaddr* dst, sockaddr_storage* src) {
  memset(src, 0, sizeof(*src));
  if (is_loopback(dst)) {
    if (dst->sa_family == AF_INET) {
      auto* s = reinterpret_cast<sockaddr_in*>(src);
      s->sin_family = AF_INET;
      s->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else {
      auto* s = reinterpret_cast<sockaddr_in6*>(src);
      s->sin6_family = AF_INET6;
      s->sin6_addr = in6addr_loopback;
    }
    return 0;
  }
  int fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  sockaddr_storage to{};
  memcpy(&to, dst, sockaddr_len(dst));
  *port_of(reinterpret_cast<sockaddr*>(&to)) = htons(4791);
  int rc = 0;
  socklen_t len = sizeof(*src);
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sockaddr_len(dst)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(src), &len) != 0)
    rc = -errno;
  close(fd);
  if (rc == 0) *port_of(reinterpret_cast<sockaddr*>(src)) = 0;
  return rc;
}

/// Records the device of a (non-wildcard) source address on the id.
int attach(CmId* id, const sockaddr* src) {
  ibv_context* ctx = nullptr;
  uint8_t port = 0;
  int index = 0;
  if (int rc = find_device(src, &ctx, &port, &index); rc != 0) return rc;
  if (id->pub.verbs && id->pub.verbs != ctx) return EINVAL;
  id->pub.verbs = ctx;
  id->pub.port_num = port;
  id->gid_index = index;
  // As the kernel's librdmacm does: an id on a device has the device's
  // shared PD (UCX makes its QPs there; rdma_verbs.h registers through it).
  if (!id->pub.pd) id->pub.pd = shared_pd(ctx);
  ibv_query_gid(ctx, port, index, &id->pub.route.addr.addr.ibaddr.sgid);
  id->pub.route.addr.addr.ibaddr.pkey = htons(0xffff);
  return 0;
}

}  // namespace

socklen_t sockaddr_len(const sockaddr* a) {
  if (!a) return 0;
  if (a->sa_family == AF_INET) return sizeof(sockaddr_in);
  if (a->sa_family == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

void ip_to_gid(const sockaddr* a, ibv_gid* gid) {
  memset(gid, 0, sizeof(*gid));
  if (a->sa_family == AF_INET) {
    gid->raw[10] = 0xff;
    gid->raw[11] = 0xff;
    memcpy(&gid->raw[12], &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, 4);
  } else if (a->sa_family == AF_INET6) {
    memcpy(gid->raw, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, 16);
  }
}

int find_device(const sockaddr* ip, ibv_context** ctx, uint8_t* port, int* gid_index) {
  ibv_gid want;
  ip_to_gid(ip, &want);
  int n = 0;
  ibv_context** all = device_contexts(&n);
  for (int d = 0; all && d < n; ++d) {
    ibv_device_attr dattr{};
    if (ibv_query_device(all[d], &dattr) != 0) continue;
    for (uint8_t p = 1; p <= dattr.phys_port_cnt; ++p) {
      ibv_port_attr pattr{};
      if (ibv_query_port(all[d], p, &pattr) != 0) continue;
      for (int i = 0; i < pattr.gid_tbl_len; ++i) {
        ibv_gid g{};
        if (ibv_query_gid(all[d], p, i, &g) != 0) continue;
        if (memcmp(&g, &want, sizeof(g)) != 0) continue;
        *ctx = all[d];
        *port = p;
        *gid_index = i;
        return 0;
      }
    }
  }
  return host_has(ip) ? ENODEV : EADDRNOTAVAIL;
}

}  // namespace uroce::rdmacm

using namespace uroce::rdmacm;
namespace cmproto = uroce::cmproto;

UROCE_EXPORT int rdma_bind_addr(rdma_cm_id* cm_id, sockaddr* addr) {
  if (!cm_id || !addr) return fail(EINVAL);
  if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) return fail(EAFNOSUPPORT);
  CmId* id = from(cm_id);
  if (id->state != IdState::kIdle) return fail(EINVAL);
  // As the kernel's CM (cma_any_addr): a loopback address binds no device,
  // as the wildcard does; connecting to it still works (uroce_lo).
  if (!is_wildcard(addr) && !is_loopback(addr))
    if (int rc = attach(id, addr); rc != 0) return fail(rc);
  // The port: uroced keeps this host's port spaces (0: it picks a free one).
  cmproto::Msg m{};
  m.op = uint32_t(cmproto::Op::kBind);
  memcpy(m.src, addr, sockaddr_len(addr));
  int rc = cm_ensure_handle(id);
  if (rc == 0) {
    m.handle = id->handle;
    rc = cm_call(&m);
  }
  if (rc != 0) {
    cm_id->verbs = nullptr;
    cm_id->pd = nullptr;
    return fail(rc);
  }
  memset(&cm_id->route.addr.src_storage, 0, sizeof(cm_id->route.addr.src_storage));
  memcpy(&cm_id->route.addr.src_storage, m.src, sockaddr_len(addr));
  id->state = IdState::kBound;
  return 0;
}

UROCE_EXPORT int rdma_resolve_addr(rdma_cm_id* cm_id, sockaddr* src_addr, sockaddr* dst_addr,
                                   int timeout_ms) {
  (void)timeout_ms;  // resolution is immediate: no ARP over the kernel's UDP sockets
  if (!cm_id || !dst_addr) return fail(EINVAL);
  if (dst_addr->sa_family != AF_INET && dst_addr->sa_family != AF_INET6) return fail(EAFNOSUPPORT);
  CmId* id = from(cm_id);
  if (id->state == IdState::kIdle) {
    sockaddr_storage any{};
    any.ss_family = dst_addr->sa_family;
    sockaddr* bind_to = src_addr ? src_addr : reinterpret_cast<sockaddr*>(&any);
    if (bind_to->sa_family != dst_addr->sa_family) return fail(EINVAL);
    if (rdma_bind_addr(cm_id, bind_to) != 0) return -1;
  } else if (id->state != IdState::kBound) {
    return fail(EINVAL);
  }
  memcpy(&cm_id->route.addr.dst_storage, dst_addr, sockaddr_len(dst_addr));

  // The source: the bound address, or the one routing picks.
  int status = 0;
  sockaddr* bound = &cm_id->route.addr.src_addr;
  if (bound->sa_family != dst_addr->sa_family) {
    status = -EINVAL;
  } else if (is_wildcard(bound) || !cm_id->verbs) {
    sockaddr_storage picked{};
    status = source_for(dst_addr, &picked);
    if (status == 0) {
      *port_of(reinterpret_cast<sockaddr*>(&picked)) = *port_of(bound);
      int rc = attach(id, reinterpret_cast<sockaddr*>(&picked));
      if (rc != 0)
        status = -(rc == EADDRNOTAVAIL ? ENODEV : rc);
      else
        memcpy(&cm_id->route.addr.src_storage, &picked, sizeof(picked));
    }
  }
  if (status == 0) {
    ip_to_gid(dst_addr, &cm_id->route.addr.addr.ibaddr.dgid);
    id->state = IdState::kAddrResolved;
  }
  post_event(id, status == 0 ? RDMA_CM_EVENT_ADDR_RESOLVED : RDMA_CM_EVENT_ADDR_ERROR, status);
  return id->sync ? sync_wait(id) : 0;
}

UROCE_EXPORT int rdma_resolve_route(rdma_cm_id* cm_id, int timeout_ms) {
  (void)timeout_ms;  // RoCE: the path is computed here, nothing is asked of a subnet manager
  if (!cm_id) return fail(EINVAL);
  CmId* id = from(cm_id);
  if (id->state != IdState::kAddrResolved) return fail(EINVAL);
  ibv_port_attr pattr{};
  if (ibv_query_port(cm_id->verbs, cm_id->port_num, &pattr) != 0) return -1;
  ibv_sa_path_rec& p = id->path;
  memset(&p, 0, sizeof(p));
  p.dgid = cm_id->route.addr.addr.ibaddr.dgid;
  p.sgid = cm_id->route.addr.addr.ibaddr.sgid;
  p.pkey = htons(0xffff);
  p.hop_limit = is_loopback(&cm_id->route.addr.dst_addr) ? 1 : 64;
  p.traffic_class = id->tos;
  p.reversible = 1;
  p.numb_path = 1;
  p.mtu_selector = 2;  // exactly
  p.mtu = uint8_t(pattr.active_mtu);
  p.rate_selector = 2;
  p.rate = 0;
  p.packet_life_time_selector = 2;
  p.packet_life_time = 18;
  cm_id->route.path_rec = &p;
  cm_id->route.num_paths = 1;
  id->state = IdState::kRouteResolved;
  post_event(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
  return id->sync ? sync_wait(id) : 0;
}

UROCE_EXPORT __be16 rdma_get_src_port(rdma_cm_id* id) {
  in_port_t* p = port_of(&id->route.addr.src_addr);
  return p ? *p : 0;
}

UROCE_EXPORT __be16 rdma_get_dst_port(rdma_cm_id* id) {
  in_port_t* p = port_of(&id->route.addr.dst_addr);
  return p ? *p : 0;
}

namespace {

sockaddr* copy_addr(const sockaddr* a, socklen_t len) {
  auto* c = static_cast<sockaddr*>(calloc(1, len));
  if (c) memcpy(c, a, len);
  return c;
}

}  // namespace

UROCE_EXPORT int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                                  rdma_addrinfo** res) {
  if (!res) return EAI_SYSTEM;
  addrinfo h{};
  h.ai_socktype = SOCK_STREAM;
  h.ai_family = hints ? hints->ai_family : AF_UNSPEC;
  const bool passive = hints && (hints->ai_flags & RAI_PASSIVE);
  if (passive) h.ai_flags |= AI_PASSIVE;
  if (hints && (hints->ai_flags & RAI_NUMERICHOST)) h.ai_flags |= AI_NUMERICHOST;
  addrinfo* ai = nullptr;
  if (node || service) {
    if (int rc = getaddrinfo(node, service, &h, &ai); rc != 0) return rc;
  }
  auto* r = static_cast<rdma_addrinfo*>(calloc(1, sizeof(rdma_addrinfo)));
  if (!r) {
    if (ai) freeaddrinfo(ai);
    return EAI_MEMORY;
  }
  r->ai_flags = hints ? hints->ai_flags : 0;
  r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
  r->ai_qp_type = hints && hints->ai_qp_type                                             ? hints->ai_qp_type
                  : r->ai_port_space == RDMA_PS_UDP || r->ai_port_space == RDMA_PS_IPOIB ? IBV_QPT_UD
                                                                                         : IBV_QPT_RC;
  if (ai) {
    r->ai_family = ai->ai_family;
    sockaddr* a = copy_addr(ai->ai_addr, ai->ai_addrlen);
    if (passive) {
      r->ai_src_addr = a;
      r->ai_src_len = ai->ai_addrlen;
    } else {
      r->ai_dst_addr = a;
      r->ai_dst_len = ai->ai_addrlen;
    }
    freeaddrinfo(ai);
  }
  // Addresses the caller gives in the hints (libfabric passes them so, with
  // neither node nor service) are taken as they are.
  if (hints && hints->ai_src_addr && hints->ai_src_len && !r->ai_src_addr) {
    r->ai_src_addr = copy_addr(hints->ai_src_addr, hints->ai_src_len);
    r->ai_src_len = hints->ai_src_len;
    if (!r->ai_family) r->ai_family = hints->ai_src_addr->sa_family;
  }
  if (hints && hints->ai_dst_addr && hints->ai_dst_len && !r->ai_dst_addr) {
    r->ai_dst_addr = copy_addr(hints->ai_dst_addr, hints->ai_dst_len);
    r->ai_dst_len = hints->ai_dst_len;
    if (!r->ai_family) r->ai_family = hints->ai_dst_addr->sa_family;
  }
  *res = r;
  return 0;
}

UROCE_EXPORT void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res) {
    rdma_addrinfo* next = res->ai_next;
    free(res->ai_src_addr);
    free(res->ai_dst_addr);
    free(res->ai_src_canonname);
    free(res->ai_dst_canonname);
    free(res->ai_route);
    free(res->ai_connect);
    free(res);
    res = next;
  }
}
