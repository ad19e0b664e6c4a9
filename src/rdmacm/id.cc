// Communication identifiers: create, destroy, move to another channel,
// options, and the QP, CQs and SRQ the CM makes for them (rdma_create_qp,
// rdma_create_srq, rdma_create_ep).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "common/export.h"
#include "rdmacm/cm.h"
#include "rdmacm/link.h"

namespace uroce::rdmacm {
namespace {

bool qp_type_of(rdma_port_space ps, ibv_qp_type* t) {
  switch (ps) {
    case RDMA_PS_TCP:
    case RDMA_PS_IB:
      *t = IBV_QPT_RC;
      return true;
    case RDMA_PS_UDP:
    case RDMA_PS_IPOIB:
      *t = IBV_QPT_UD;
      return true;
  }
  return false;
}

/// Moves the events of `id` still queued on `from_c` to `to_c` (nullptr:
/// drops them). The ones they leave in from_c's eventfd make a reader there
/// look again (cm.h).
void move_queued(CmId* id, Channel* from_c, Channel* to_c) {
  std::deque<Event*> mine;
  {
    std::lock_guard<std::mutex> g(from_c->mu);
    for (auto it = from_c->queue.begin(); it != from_c->queue.end();) {
      if ((*it)->pub.id == &id->pub) {
        mine.push_back(*it);
        it = from_c->queue.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (Event* e : mine) {
    if (!to_c) {
      delete e;
      continue;
    }
    queue_event(&to_c->pub, e);
  }
}

/// Waits until the program acknowledged every event it was given for `id`.
void wait_acked(CmId* id) {
  std::unique_lock<std::mutex> g(id->mu);
  // As the kernel's librdmacm does, this waits for the program: an event it
  // never acknowledges keeps rdma_destroy_id here (rdma_destroy_id(3)).
  id->acked.wait(g, [id] { return id->events_acked >= id->events_reported; });
}

void release_sync_event(CmId* id) {
  if (id->sync && id->pub.event) {
    rdma_ack_cm_event(id->pub.event);
    id->pub.event = nullptr;
  }
}

/// INIT for a connected QP; INIT, RTR and RTS at once for a UD QP (its
/// peers are named per work request), as the kernel's CM does.
int init_qp(CmId* id, ibv_qp* qp) {
  for (ibv_qp_state s : {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS}) {
    if (s != IBV_QPS_INIT && qp->qp_type != IBV_QPT_UD) break;
    ibv_qp_attr a;
    int mask = 0;
    if (int rc = qp_attr_for(id, s, &a, &mask); rc != 0) return rc;
    if (int rc = ibv_modify_qp(qp, &a, mask); rc != 0) return rc;
  }
  return 0;
}

void destroy_cqs(CmId* id) {
  rdma_cm_id& p = id->pub;
  if (id->cqs_ours[0] && p.send_cq) ibv_destroy_cq(p.send_cq);
  if (id->cqs_ours[1] && p.recv_cq && p.recv_cq != p.send_cq) ibv_destroy_cq(p.recv_cq);
  if (id->cqs_ours[0] && p.send_cq_channel) ibv_destroy_comp_channel(p.send_cq_channel);
  if (id->cqs_ours[1] && p.recv_cq_channel) ibv_destroy_comp_channel(p.recv_cq_channel);
  if (id->cqs_ours[0]) {
    p.send_cq = nullptr;
    p.send_cq_channel = nullptr;
  }
  if (id->cqs_ours[1]) {
    p.recv_cq = nullptr;
    p.recv_cq_channel = nullptr;
  }
  id->cqs_ours[0] = id->cqs_ours[1] = false;
}

/// A CQ with its own completion channel, as rdma_create_qp makes when the
/// program gives none (send: which 0, receive: 1).
bool make_cq(CmId* id, int which, uint32_t depth) {
  rdma_cm_id& p = id->pub;
  ibv_comp_channel* ch = ibv_create_comp_channel(p.verbs);
  if (!ch) return false;
  ibv_cq* cq = ibv_create_cq(p.verbs, int(depth ? depth : 1), &p, ch, 0);
  if (!cq) {
    ibv_destroy_comp_channel(ch);
    return false;
  }
  (which == 0 ? p.send_cq : p.recv_cq) = cq;
  (which == 0 ? p.send_cq_channel : p.recv_cq_channel) = ch;
  id->cqs_ours[which] = true;
  return true;
}

}  // namespace
}  // namespace uroce::rdmacm

using namespace uroce::rdmacm;

UROCE_EXPORT int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** out, void* context,
                                rdma_port_space ps) {
  if (!out) return fail(EINVAL);
  ibv_qp_type qpt;
  if (!qp_type_of(ps, &qpt)) return fail(EINVAL);
  int n = 0;
  if (!device_contexts(&n)) return -1;  // no device: ENODEV, as without the kernel module
  auto* id = new (std::nothrow) CmId();
  if (!id) return fail(ENOMEM);
  if (!channel) {
    channel = rdma_create_event_channel();
    if (!channel) {
      delete id;
      return -1;
    }
    id->sync = true;
  }
  id->pub.channel = channel;
  id->pub.context = context;
  id->pub.ps = ps;
  id->pub.qp_type = qpt;
  *out = &id->pub;
  return 0;
}

UROCE_EXPORT int rdma_destroy_id(rdma_cm_id* cm_id) {
  if (!cm_id) return fail(EINVAL);
  CmId* id = from(cm_id);
  id->state = IdState::kDestroying;
  cm_drop_handle(id);  // uroced sends nothing more for it, and tells its peer
  release_sync_event(id);
  move_queued(id, from(cm_id->channel), nullptr);
  wait_acked(id);
  if (id->sync) rdma_destroy_event_channel(cm_id->channel);
  delete id;
  return 0;
}

UROCE_EXPORT int rdma_migrate_id(rdma_cm_id* cm_id, rdma_event_channel* channel) {
  if (!cm_id) return fail(EINVAL);
  CmId* id = from(cm_id);
  const bool to_sync = channel == nullptr;
  if (to_sync) {
    channel = rdma_create_event_channel();
    if (!channel) return -1;
  }
  release_sync_event(id);
  Channel* old = from(cm_id->channel);
  move_queued(id, old, from(channel));
  wait_acked(id);
  cm_id->channel = channel;
  if (id->sync) rdma_destroy_event_channel(&old->pub);
  id->sync = to_sync;
  return 0;
}

UROCE_EXPORT int rdma_set_option(rdma_cm_id* cm_id, int level, int optname, void* optval, size_t optlen) {
  if (!cm_id || !optval) return fail(EINVAL);
  CmId* id = from(cm_id);
  if (level == RDMA_OPTION_ID) {
    switch (optname) {
      case RDMA_OPTION_ID_TOS:
        if (optlen != sizeof(uint8_t)) return fail(EINVAL);
        id->tos = *static_cast<uint8_t*>(optval);
        id->tos_set = true;
        return 0;
      case RDMA_OPTION_ID_REUSEADDR:
        if (optlen != sizeof(int)) return fail(EINVAL);
        id->reuseaddr = *static_cast<int*>(optval) != 0;
        return 0;
      case RDMA_OPTION_ID_AFONLY:
        if (optlen != sizeof(int)) return fail(EINVAL);
        id->afonly = *static_cast<int*>(optval) != 0;
        return 0;
      case RDMA_OPTION_ID_ACK_TIMEOUT:
        if (optlen != sizeof(uint8_t)) return fail(EINVAL);
        id->ack_timeout = *static_cast<uint8_t*>(optval);
        id->ack_timeout_set = true;
        return 0;
    }
  }
  // What the kernel answers for options it does not know.
  return fail(ENOSYS);
}

UROCE_EXPORT int rdma_set_local_ece(rdma_cm_id* cm_id, ibv_ece* ece) {
  if (!cm_id || !ece) return fail(EINVAL);
  from(cm_id)->local_ece = *ece;
  return 0;
}

UROCE_EXPORT int rdma_get_remote_ece(rdma_cm_id* cm_id, ibv_ece* ece) {
  if (!cm_id || !ece) return fail(EINVAL);
  *ece = from(cm_id)->remote_ece;
  return 0;
}

UROCE_EXPORT int rdma_create_qp_ex(rdma_cm_id* cm_id, ibv_qp_init_attr_ex* attr) {
  if (!cm_id || !attr) return fail(EINVAL);
  CmId* id = from(cm_id);
  if (!cm_id->verbs || cm_id->qp) return fail(EINVAL);
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
    attr->pd = cm_id->pd ? cm_id->pd : shared_pd(cm_id->verbs);
    if (!attr->pd) return -1;
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
  }
  if (attr->pd->context != cm_id->verbs) return fail(EINVAL);
  if (!attr->send_cq && !cm_id->send_cq && !make_cq(id, 0, attr->cap.max_send_wr)) return -1;
  if (!attr->recv_cq && !cm_id->recv_cq && !attr->srq && !make_cq(id, 1, attr->cap.max_recv_wr)) {
    destroy_cqs(id);
    return -1;
  }
  if (!attr->send_cq) attr->send_cq = cm_id->send_cq;
  if (!attr->recv_cq) attr->recv_cq = cm_id->recv_cq ? cm_id->recv_cq : cm_id->send_cq;
  if (!attr->srq) attr->srq = cm_id->srq;
  ibv_qp* qp = ibv_create_qp_ex(cm_id->verbs, attr);
  if (!qp) {
    const int err = errno;
    destroy_cqs(id);
    return fail(err);
  }
  if (init_qp(id, qp) != 0) {
    const int err = errno;
    ibv_destroy_qp(qp);
    destroy_cqs(id);
    return fail(err ? err : EINVAL);
  }
  cm_id->qp = qp;
  return 0;
}

UROCE_EXPORT int rdma_create_qp(rdma_cm_id* cm_id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (!cm_id || !qp_init_attr) return fail(EINVAL);
  ibv_qp_init_attr_ex ex{};
  memcpy(&ex, qp_init_attr, sizeof(*qp_init_attr));
  ex.comp_mask = pd ? IBV_QP_INIT_ATTR_PD : 0;
  ex.pd = pd;
  if (rdma_create_qp_ex(cm_id, &ex) != 0) return -1;
  // The caller sees what was made: CQs, SRQ, and the capabilities granted.
  qp_init_attr->send_cq = ex.send_cq;
  qp_init_attr->recv_cq = ex.recv_cq;
  qp_init_attr->srq = ex.srq;
  qp_init_attr->cap = ex.cap;
  return 0;
}

UROCE_EXPORT void rdma_destroy_qp(rdma_cm_id* cm_id) {
  if (!cm_id) return;
  for (Group& g : from(cm_id)->groups) {
    if (g.attached && cm_id->qp) ibv_detach_mcast(cm_id->qp, &g.mgid, 0);
    g.attached = false;
  }
  if (cm_id->qp) ibv_destroy_qp(cm_id->qp);
  cm_id->qp = nullptr;
  destroy_cqs(from(cm_id));
}

UROCE_EXPORT int rdma_create_srq_ex(rdma_cm_id* cm_id, ibv_srq_init_attr_ex* attr) {
  if (!cm_id || !attr || !cm_id->verbs || cm_id->srq) return fail(EINVAL);
  CmId* id = from(cm_id);
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
    attr->pd = cm_id->pd ? cm_id->pd : shared_pd(cm_id->verbs);
    if (!attr->pd) return -1;
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
  }
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)) {
    attr->srq_type = IBV_SRQT_BASIC;
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_TYPE;
  }
  if (attr->srq_type == IBV_SRQT_XRC && !(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ)) {
    if (!cm_id->recv_cq && !make_cq(id, 1, attr->attr.max_wr)) return -1;
    attr->cq = cm_id->recv_cq;
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
  }
  ibv_srq* srq = ibv_create_srq_ex(cm_id->verbs, attr);
  if (!srq) return -1;
  cm_id->srq = srq;
  return 0;
}

UROCE_EXPORT int rdma_create_srq(rdma_cm_id* cm_id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (!cm_id || !attr) return fail(EINVAL);
  ibv_srq_init_attr_ex ex{};
  ex.srq_context = attr->srq_context;
  ex.attr = attr->attr;
  ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | (pd ? IBV_SRQ_INIT_ATTR_PD : 0);
  ex.srq_type = IBV_SRQT_BASIC;
  ex.pd = pd;
  if (rdma_create_srq_ex(cm_id, &ex) != 0) return -1;
  attr->attr = ex.attr;
  return 0;
}

UROCE_EXPORT int rdma_destroy_srq(rdma_cm_id* cm_id) {
  if (!cm_id || !cm_id->srq) return fail(EINVAL);
  int rc = ibv_destroy_srq(cm_id->srq);
  if (rc != 0) return fail(rc);
  cm_id->srq = nullptr;
  if (!cm_id->qp) destroy_cqs(from(cm_id));
  return 0;
}

UROCE_EXPORT int rdma_create_ep(rdma_cm_id** out, rdma_addrinfo* res, ibv_pd* pd,
                                ibv_qp_init_attr* qp_init_attr) {
  if (!out || !res) return fail(EINVAL);
  rdma_cm_id* cm_id = nullptr;
  if (rdma_create_id(nullptr, &cm_id, nullptr, static_cast<rdma_port_space>(res->ai_port_space)) != 0)
    return -1;
  int rc;
  if (res->ai_flags & RAI_PASSIVE) {
    rc = rdma_bind_addr(cm_id, res->ai_src_addr);
  } else {
    rc = rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000);
    if (rc == 0) rc = rdma_resolve_route(cm_id, 2000);
  }
  if (rc == 0 && pd) cm_id->pd = pd;  // else the device's shared PD, if bound to one
  if (rc == 0 && qp_init_attr && (res->ai_flags & RAI_PASSIVE)) {
    // The QP comes with each connection (rdma_get_request).
    CmId* id = from(cm_id);
    id->qp_init = *qp_init_attr;
    id->qp_init.qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
    id->has_qp_init = true;
  } else if (rc == 0 && qp_init_attr && cm_id->verbs) {
    qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
    rc = rdma_create_qp(cm_id, pd, qp_init_attr);
  }
  if (rc != 0) {
    const int err = errno;
    rdma_destroy_id(cm_id);
    return fail(err);
  }
  *out = cm_id;
  return 0;
}

UROCE_EXPORT void rdma_destroy_ep(rdma_cm_id* cm_id) {
  if (!cm_id) return;
  if (cm_id->qp) rdma_destroy_qp(cm_id);
  if (cm_id->srq) rdma_destroy_srq(cm_id);
  rdma_destroy_id(cm_id);
}
