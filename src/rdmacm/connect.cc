// Connections: listen, connect, accept, reject, establish, disconnect, the
// QP attributes the CM gives a program that moves its own QP
// (rdma_init_qp_attr), and what each of uroced's events does to an id.
//
// As with the kernel's CM: the connecting side says its QP number and first
// PSN (the REQ), the listener's side answers with its own (the REP), and the
// connecting side's "ready" (the RTU) tells the listener's side it is
// established. The library moves a QP it made (rdma_create_qp) through
// RTR and RTS itself: the listener's side at rdma_accept, the connecting side
// when the answer comes. A program without such a QP gets CONNECT_RESPONSE,
// moves its QP with rdma_init_qp_attr and calls rdma_establish.
//
// Not built yet: the CM on the wire (connections to other hosts are
// UNREACHABLE), UD's SIDR, multicast.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/export.h"
#include "rdmacm/cm.h"
#include "rdmacm/link.h"

namespace uroce::rdmacm {
namespace {

using cmproto::Msg;
using cmproto::Op;

static_assert(uint32_t(cmproto::kEvConnectRequest) == uint32_t(RDMA_CM_EVENT_CONNECT_REQUEST));
static_assert(uint32_t(cmproto::kEvConnectResponse) == uint32_t(RDMA_CM_EVENT_CONNECT_RESPONSE));
static_assert(uint32_t(cmproto::kEvUnreachable) == uint32_t(RDMA_CM_EVENT_UNREACHABLE));
static_assert(uint32_t(cmproto::kEvRejected) == uint32_t(RDMA_CM_EVENT_REJECTED));
static_assert(uint32_t(cmproto::kEvEstablished) == uint32_t(RDMA_CM_EVENT_ESTABLISHED));
static_assert(uint32_t(cmproto::kEvDisconnected) == uint32_t(RDMA_CM_EVENT_DISCONNECTED));

// The private data sizes a program sees: the whole field of the CM message
// that carried it, as the kernel reports (REQ after the CM's own header).
constexpr uint8_t kReqPrivateData = 56;
constexpr uint8_t kRepPrivateData = 196;
constexpr uint8_t kRejPrivateData = 148;
constexpr uint8_t kSidrReqPrivateData = 180;  // 216 after the CM's own header
constexpr uint8_t kSidrRepPrivateData = 136;
constexpr uint8_t kAckTimeout = 14;  // 4.096 us * 2^14 = 67 ms
constexpr uint32_t kUdpQkey = 0x01234567;

int fail(int err) {
  errno = err;
  return -1;
}

uint32_t random_psn() {
  uint32_t r = 0;
  if (getrandom(&r, sizeof(r), 0) != sizeof(r)) r = 0x123456;
  return r & 0xffffff;
}

/// The program's private data, checked against what the message can carry.
bool copy_private(cmproto::Conn* c, const void* data, uint8_t len, uint8_t max) {
  if (len > max) return false;
  c->private_data_len = len;
  if (len && data) memcpy(c->private_data, data, len);
  return true;
}

/// Device limits and the port's MTU, and the first PSN, chosen once per id:
/// a program may move its QP (rdma_init_qp_attr) before it calls
/// rdma_accept, whose REP must then carry the PSN the QP got.
void prepare_own(CmId* id) {
  if (id->own_ready) return;
  ibv_port_attr port{};
  ibv_query_port(id->pub.verbs, id->pub.port_num, &port);
  id->own.psn = random_psn();
  id->own.mtu = uint8_t(port.active_mtu ? port.active_mtu : IBV_MTU_1024);
  if (id->has_remote) {
    // What the kernel's CM answers by default: what the other side may ask.
    ibv_device_attr dev{};
    ibv_query_device(id->pub.verbs, &dev);
    id->own.responder_resources = uint8_t(std::min<int>(id->remote.initiator_depth, dev.max_qp_rd_atom));
    id->own.initiator_depth = uint8_t(std::min<int>(id->remote.responder_resources, dev.max_qp_init_rd_atom));
  }
  id->own_ready = true;
}

/// This side's part of the exchange, from the program's parameters and its
/// QP (if the CM made one).
bool own_conn(CmId* id, const rdma_conn_param* p, uint8_t max_private, cmproto::Conn* c) {
  prepare_own(id);
  *c = id->own;
  c->private_data_len = 0;
  if (p) {
    ibv_device_attr dev{};
    ibv_query_device(id->pub.verbs, &dev);
    c->responder_resources = uint8_t(std::min<int>(p->responder_resources, dev.max_qp_rd_atom));
    c->initiator_depth = uint8_t(std::min<int>(p->initiator_depth, dev.max_qp_init_rd_atom));
    c->retry_count = std::min<uint8_t>(p->retry_count, 7);
    c->rnr_retry_count = std::min<uint8_t>(p->rnr_retry_count, 7);
    c->flow_control = p->flow_control;
    if (!copy_private(c, p->private_data, p->private_data_len, max_private)) return false;
  }
  if (id->pub.qp) {
    c->qpn = id->pub.qp->qp_num;
    c->srq = id->pub.qp->srq != nullptr;
  } else if (p) {
    c->qpn = p->qp_num & 0xffffff;
    c->srq = p->srq;
  }
  return true;
}

}  // namespace

int qp_attr_for(CmId* id, ibv_qp_state state, ibv_qp_attr* a, int* mask) {
  memset(a, 0, sizeof(*a));
  a->qp_state = state;
  if (state == IBV_QPS_INIT) {
    a->pkey_index = 0;
    a->port_num = id->pub.port_num;
    *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
    if (id->pub.qp_type == IBV_QPT_UD) {
      a->qkey = kUdpQkey;
      *mask |= IBV_QP_QKEY;
    } else {
      a->qp_access_flags = 0;
      *mask |= IBV_QP_ACCESS_FLAGS;
    }
    return 0;
  }
  if (id->pub.qp_type == IBV_QPT_UD) {
    *mask = IBV_QP_STATE;
    if (state == IBV_QPS_RTS) {
      a->sq_psn = 0;
      *mask |= IBV_QP_SQ_PSN;
    }
    return 0;
  }
  if (!id->has_remote) return EINVAL;
  prepare_own(id);
  if (state == IBV_QPS_RTR) {
    a->path_mtu = ibv_mtu(std::min(id->own.mtu, id->remote.mtu));
    a->dest_qp_num = id->remote.qpn;
    a->rq_psn = id->remote.psn;
    a->max_dest_rd_atomic = id->own.responder_resources;
    a->min_rnr_timer = 12;  // 0.64 ms
    a->qp_access_flags =
        IBV_ACCESS_REMOTE_WRITE |
        (id->own.responder_resources ? IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC : 0);
    ibv_ah_attr& ah = a->ah_attr;
    ah.is_global = 1;
    ah.grh.dgid = id->pub.route.addr.addr.ibaddr.dgid;
    ah.grh.sgid_index = uint8_t(id->gid_index);
    ah.grh.hop_limit = 64;
    ah.grh.traffic_class = id->tos;
    ah.port_num = id->pub.port_num;
    *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_ACCESS_FLAGS;
    return 0;
  }
  if (state == IBV_QPS_RTS) {
    a->sq_psn = id->own.psn;
    a->timeout = kAckTimeout;
    // The connecting side's retry count (in its REQ) holds for both QPs; the
    // RNR retry count each side uses is the one the other side sent (REQ,
    // REP), as the kernel's CM does.
    a->retry_cnt = id->passive ? id->remote.retry_count : id->own.retry_count;
    a->rnr_retry = id->remote.rnr_retry_count;
    a->max_rd_atomic = id->own.initiator_depth;
    *mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
            IBV_QP_MAX_QP_RD_ATOMIC;
    return 0;
  }
  return EINVAL;
}

namespace {

/// Moves the CM's QP of `id` to RTR and RTS. 0 or an errno.
int ready_qp(CmId* id) {
  for (ibv_qp_state s : {IBV_QPS_RTR, IBV_QPS_RTS}) {
    ibv_qp_attr a;
    int mask = 0;
    if (int rc = qp_attr_for(id, s, &a, &mask); rc != 0) return rc;
    if (int rc = ibv_modify_qp(id->pub.qp, &a, mask); rc != 0) return rc;
  }
  return 0;
}

void qp_to_error(CmId* id) {
  if (!id->pub.qp) return;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(id->pub.qp, &a, IBV_QP_STATE);
}

/// An event with the other side's part of the exchange (param.conn).
Event* conn_event(CmId* id, rdma_cm_event_type type, int status, const cmproto::Conn& c, uint8_t pd_len) {
  auto* e = new Event();
  e->pub.id = &id->pub;
  e->pub.event = type;
  e->pub.status = status;
  memcpy(e->private_data, c.private_data, sizeof(c.private_data));
  rdma_conn_param& p = e->pub.param.conn;
  p.private_data = e->private_data;
  p.private_data_len = pd_len;
  // As the receiver sees it: the sender's initiator depth is what this side
  // must be ready to answer, and the other way round.
  p.responder_resources = c.initiator_depth;
  p.initiator_depth = c.responder_resources;
  p.flow_control = c.flow_control;
  p.retry_count = c.retry_count;
  p.rnr_retry_count = c.rnr_retry_count;
  p.srq = c.srq;
  p.qp_num = c.qpn;
  return e;
}

/// An event of a UD id (param.ud): for the connecting side, with what it
/// needs to reach the other side's QP (an address handle, QP number, Q_Key).
Event* ud_event(CmId* id, rdma_cm_event_type type, int status, const cmproto::Conn& c, uint8_t pd_len,
                bool with_peer) {
  auto* e = new Event();
  e->pub.id = &id->pub;
  e->pub.event = type;
  e->pub.status = status;
  memcpy(e->private_data, c.private_data, sizeof(c.private_data));
  rdma_ud_param& p = e->pub.param.ud;
  p.private_data = e->private_data;
  p.private_data_len = pd_len;
  if (with_peer) {
    ibv_ah_attr& ah = p.ah_attr;
    ah.is_global = 1;
    ah.grh.dgid = id->pub.route.addr.addr.ibaddr.dgid;
    ah.grh.sgid_index = uint8_t(id->gid_index);
    ah.grh.hop_limit = 64;
    ah.grh.traffic_class = id->tos;
    ah.port_num = id->pub.port_num;
    p.qp_num = c.qpn;
    p.qkey = kUdpQkey;
  }
  return e;
}

void queue(rdma_event_channel* ch, Event* e) {
  Channel* c = from(ch);
  {
    std::lock_guard<std::mutex> g(c->mu);
    c->queue.push_back(e);
  }
  const uint64_t one = 1;
  (void)!write(c->pub.fd, &one, sizeof(one));
}

/// A CONNECT_REQUEST: a new id for the connection, on the listener's channel.
void on_request(const Msg& m) {
  CmId* listener = cm_find(m.listen_handle);
  if (!listener) return;
  auto* id = new CmId();
  rdma_cm_id& p = id->pub;
  // The request comes on the listener's channel; the new id of a
  // synchronous listener has a channel of its own for what follows.
  p.channel = listener->pub.channel;
  if (listener->sync) {
    p.channel = rdma_create_event_channel();
    if (!p.channel) {
      delete id;
      return;
    }
    id->sync = true;
  }
  p.context = listener->pub.context;
  p.ps = listener->pub.ps;
  p.qp_type = listener->pub.qp_type;
  memcpy(&p.route.addr.src_storage, m.src, sizeof(m.src));
  memcpy(&p.route.addr.dst_storage, m.dst, sizeof(m.dst));
  ibv_context* ctx = nullptr;
  uint8_t port = 0;
  int index = 0;
  if (find_device(&p.route.addr.src_addr, &ctx, &port, &index) == 0) {
    p.verbs = ctx;
    p.port_num = port;
    id->gid_index = index;
    p.pd = shared_pd(ctx);
  }
  memcpy(p.route.addr.addr.ibaddr.sgid.raw, m.sgid, 16);
  memcpy(p.route.addr.addr.ibaddr.dgid.raw, m.dgid, 16);
  p.route.addr.addr.ibaddr.pkey = htons(0xffff);
  id->path.sgid = p.route.addr.addr.ibaddr.sgid;
  id->path.dgid = p.route.addr.addr.ibaddr.dgid;
  id->path.pkey = htons(0xffff);
  id->path.mtu = m.conn.mtu;
  id->path.numb_path = 1;
  p.route.path_rec = &id->path;
  p.route.num_paths = 1;
  id->tos = listener->tos;
  id->remote = m.conn;
  id->has_remote = true;
  id->state = IdState::kRequested;
  id->passive = true;
  if (p.verbs) prepare_own(id);
  cm_adopt_handle(id, m.handle);
  Event* e = p.qp_type == IBV_QPT_UD
                 ? ud_event(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, m.conn, kSidrReqPrivateData, false)
                 : conn_event(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, m.conn, kReqPrivateData);
  e->pub.listen_id = &listener->pub;
  queue(listener->pub.channel, e);
}

/// The listener's answer reached the connecting side.
void on_response(CmId* id, const Msg& m) {
  id->remote = m.conn;
  id->has_remote = true;
  if (id->pub.qp_type == IBV_QPT_UD) {
    // SIDR's answer: the other side's QP, and nothing to move here.
    id->state = IdState::kConnected;
    queue(id->pub.channel, ud_event(id, RDMA_CM_EVENT_ESTABLISHED, 0, m.conn, kSidrRepPrivateData, true));
    return;
  }
  if (!id->pub.qp) {
    id->state = IdState::kResponded;
    queue(id->pub.channel, conn_event(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, m.conn, kRepPrivateData));
    return;
  }
  if (int rc = ready_qp(id); rc != 0) {
    qp_to_error(id);
    Msg d{};
    d.op = uint32_t(Op::kDisconnect);
    d.handle = id->handle;
    cm_post(&d);
    id->state = IdState::kDisconnected;
    queue(id->pub.channel, conn_event(id, RDMA_CM_EVENT_CONNECT_ERROR, -rc, m.conn, 0));
    return;
  }
  Msg rtu{};
  rtu.op = uint32_t(Op::kEstablish);
  rtu.handle = id->handle;
  cm_post(&rtu);
  id->state = IdState::kConnected;
  queue(id->pub.channel, conn_event(id, RDMA_CM_EVENT_ESTABLISHED, 0, m.conn, kRepPrivateData));
}

/// Waits, for a synchronous id, for the event its call caused.
int settle(CmId* id) { return id->sync ? sync_wait(id) : 0; }

Msg request(Op op, CmId* id) {
  Msg m{};
  m.op = uint32_t(op);
  m.handle = id->handle;
  return m;
}

}  // namespace

void on_cm_event(const Msg& m) {
  if (m.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
    on_request(m);
    return;
  }
  CmId* id = cm_find(m.handle);
  if (!id) return;
  switch (m.event) {
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
      on_response(id, m);
      break;
    case RDMA_CM_EVENT_ESTABLISHED:
      id->state = IdState::kConnected;
      queue(id->pub.channel, conn_event(id, RDMA_CM_EVENT_ESTABLISHED, 0, m.conn, 0));
      break;
    case RDMA_CM_EVENT_REJECTED:
      id->state = IdState::kDisconnected;
      queue(id->pub.channel, conn_event(id, RDMA_CM_EVENT_REJECTED, m.status, m.conn, kRejPrivateData));
      break;
    case RDMA_CM_EVENT_DISCONNECTED:
      id->state = IdState::kDisconnected;
      queue(id->pub.channel, conn_event(id, RDMA_CM_EVENT_DISCONNECTED, 0, m.conn, 0));
      break;
    default:
      id->state = IdState::kDisconnected;
      queue(id->pub.channel, conn_event(id, rdma_cm_event_type(m.event), m.status, m.conn, 0));
      break;
  }
}

}  // namespace uroce::rdmacm

using namespace uroce::rdmacm;

UROCE_EXPORT int rdma_listen(rdma_cm_id* cm_id, int backlog) {
  if (!cm_id) return fail(EINVAL);
  CmId* id = from(cm_id);
  if (id->state == IdState::kIdle) {
    // As the kernel: listening unbound means every IPv4 address.
    sockaddr_in any{};
    any.sin_family = AF_INET;
    if (rdma_bind_addr(cm_id, reinterpret_cast<sockaddr*>(&any)) != 0) return -1;
  }
  if (id->state != IdState::kBound && id->state != IdState::kListening) return fail(EINVAL);
  Msg m = request(Op::kListen, id);
  m.arg = uint32_t(backlog);
  if (int rc = cm_call(&m); rc != 0) return fail(rc);
  id->state = IdState::kListening;
  return 0;
}

UROCE_EXPORT int rdma_connect(rdma_cm_id* cm_id, rdma_conn_param* param) {
  if (!cm_id) return fail(EINVAL);
  CmId* id = from(cm_id);
  if (id->state != IdState::kRouteResolved || !cm_id->verbs) return fail(EINVAL);
  const bool ud = cm_id->qp_type == IBV_QPT_UD;  // a SIDR request
  if (!cm_id->qp && !param) return fail(EINVAL);
  Msg m = request(Op::kConnect, id);
  if (!own_conn(id, param, ud ? kSidrReqPrivateData : kReqPrivateData, &m.conn)) return fail(EINVAL);
  id->own = m.conn;
  memcpy(m.src, &cm_id->route.addr.src_storage, sizeof(m.src));
  memcpy(m.dst, &cm_id->route.addr.dst_storage, sizeof(m.dst));
  memcpy(m.sgid, cm_id->route.addr.addr.ibaddr.sgid.raw, 16);
  memcpy(m.dgid, cm_id->route.addr.addr.ibaddr.dgid.raw, 16);
  id->state = IdState::kConnecting;
  if (int rc = cm_call(&m); rc != 0) {
    id->state = IdState::kRouteResolved;
    return fail(rc);
  }
  return settle(id);
}

UROCE_EXPORT int rdma_accept(rdma_cm_id* cm_id, rdma_conn_param* param) {
  if (!cm_id) return fail(EINVAL);
  CmId* id = from(cm_id);
  if (id->state != IdState::kRequested) return fail(EINVAL);
  if (!cm_id->qp && !param) return fail(EINVAL);
  Msg m = request(Op::kAccept, id);
  if (cm_id->qp_type == IBV_QPT_UD) {
    // SIDR: the answer names this side's QP; the exchange ends here.
    if (!own_conn(id, param, kSidrRepPrivateData, &m.conn)) return fail(EINVAL);
    if (int rc = cm_call(&m); rc != 0) return fail(rc);
    id->state = IdState::kDisconnected;
    return 0;
  }
  if (!own_conn(id, param, kRepPrivateData, &m.conn)) return fail(EINVAL);
  id->own = m.conn;
  if (cm_id->qp) {
    if (int rc = ready_qp(id); rc != 0) {
      qp_to_error(id);
      return fail(rc);
    }
  }
  id->state = IdState::kAccepted;
  if (int rc = cm_call(&m); rc != 0) {
    id->state = IdState::kRequested;
    return fail(rc);
  }
  return settle(id);
}

namespace {

int reject(rdma_cm_id* cm_id, const void* private_data, uint8_t len) {
  if (!cm_id) return fail(EINVAL);
  CmId* id = from(cm_id);
  if (id->state != IdState::kRequested) return fail(EINVAL);
  Msg m = request(Op::kReject, id);
  if (!copy_private(&m.conn, private_data, len, kRejPrivateData)) return fail(EINVAL);
  if (int rc = cm_call(&m); rc != 0) return fail(rc);
  id->state = IdState::kDisconnected;
  return 0;
}

}  // namespace

UROCE_EXPORT int rdma_reject(rdma_cm_id* cm_id, const void* private_data, uint8_t len) {
  return reject(cm_id, private_data, len);
}

UROCE_EXPORT int rdma_reject_ece(rdma_cm_id* cm_id, const void* private_data, uint8_t len) {
  return reject(cm_id, private_data, len);
}

UROCE_EXPORT int rdma_establish(rdma_cm_id* cm_id) {
  if (!cm_id) return fail(EINVAL);
  CmId* id = from(cm_id);
  if (id->state != IdState::kResponded) return fail(EINVAL);
  Msg m = request(Op::kEstablish, id);
  if (int rc = cm_call(&m); rc != 0) return fail(rc);
  id->state = IdState::kConnected;
  return 0;
}

UROCE_EXPORT int rdma_disconnect(rdma_cm_id* cm_id) {
  if (!cm_id) return fail(EINVAL);
  CmId* id = from(cm_id);
  if (!id->handle) return fail(EINVAL);
  qp_to_error(id);
  Msg m = request(Op::kDisconnect, id);
  const bool was_connected = id->state == IdState::kConnected || id->state == IdState::kAccepted;
  if (int rc = cm_call(&m); rc != 0) return fail(rc);
  id->state = IdState::kDisconnected;
  return was_connected ? settle(id) : 0;
}

UROCE_EXPORT int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** out) {
  if (!listen || !out) return fail(EINVAL);
  CmId* l = from(listen);
  if (!l->sync || l->state != IdState::kListening) return fail(EINVAL);
  for (;;) {
    if (l->pub.event) {
      rdma_ack_cm_event(l->pub.event);
      l->pub.event = nullptr;
    }
    rdma_cm_event* e = nullptr;
    if (rdma_get_cm_event(listen->channel, &e) != 0) return -1;
    if (e->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
      rdma_ack_cm_event(e);  // not for a caller that waits for requests
      continue;
    }
    // The new id has a channel of its own (on_request) and keeps the request.
    rdma_cm_id* id = e->id;
    id->event = e;
    if (listen->pd) id->pd = listen->pd;
    if (l->has_qp_init) {
      ibv_qp_init_attr a = l->qp_init;
      if (rdma_create_qp(id, listen->pd, &a) != 0) {
        const int err = errno;
        rdma_destroy_id(id);
        return fail(err);
      }
    }
    *out = id;
    return 0;
  }
}

UROCE_EXPORT int rdma_init_qp_attr(rdma_cm_id* cm_id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  if (!cm_id || !qp_attr || !qp_attr_mask || !cm_id->verbs) return fail(EINVAL);
  const ibv_qp_state want = qp_attr->qp_state;
  if (int rc = qp_attr_for(from(cm_id), want, qp_attr, qp_attr_mask); rc != 0) return fail(rc);
  return 0;
}

UROCE_EXPORT int rdma_notify(rdma_cm_id* cm_id, ibv_event_type) {
  if (!cm_id) return fail(EINVAL);
  return 0;  // the RTU is sent when the QP is ready; nothing waits for a first receive
}

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
  queue(cm_id->channel, e);
  return settle(id);
}

}  // namespace

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
