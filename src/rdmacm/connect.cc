// Connections: listen, connect, accept, reject, establish, disconnect,
// rdma_init_qp_attr (the attributes themselves: qp_attr.cc), and what each of
// uroced's events does to an id (RC, and SIDR for UD ids).
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
// UNREACHABLE).
#include <arpa/inet.h>
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
    ah.grh.flow_label = id->flow_label;
    ah.port_num = id->pub.port_num;
    p.qp_num = c.qpn;
    p.qkey = kUdpQkey;
  }
  return e;
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
  id->flow_label = m.flow_label & 0xfffff;
  id->path.flow_label = htonl(id->flow_label);
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
  queue_event(listener->pub.channel, e);
}

/// The listener's answer reached the connecting side.
void on_response(CmId* id, const Msg& m) {
  id->remote = m.conn;
  id->has_remote = true;
  if (id->pub.qp_type == IBV_QPT_UD) {
    // SIDR's answer: the other side's QP, and nothing to move here.
    id->state = IdState::kConnected;
    queue_event(id->pub.channel,
                ud_event(id, RDMA_CM_EVENT_ESTABLISHED, 0, m.conn, kSidrRepPrivateData, true));
    return;
  }
  if (!id->pub.qp) {
    id->state = IdState::kResponded;
    queue_event(id->pub.channel, conn_event(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, m.conn, kRepPrivateData));
    return;
  }
  if (int rc = ready_qp(id); rc != 0) {
    qp_to_error(id);
    Msg d{};
    d.op = uint32_t(Op::kDisconnect);
    d.handle = id->handle;
    cm_post(&d);
    id->state = IdState::kDisconnected;
    queue_event(id->pub.channel, conn_event(id, RDMA_CM_EVENT_CONNECT_ERROR, -rc, m.conn, 0));
    return;
  }
  Msg rtu{};
  rtu.op = uint32_t(Op::kEstablish);
  rtu.handle = id->handle;
  cm_post(&rtu);
  id->state = IdState::kConnected;
  queue_event(id->pub.channel, conn_event(id, RDMA_CM_EVENT_ESTABLISHED, 0, m.conn, kRepPrivateData));
}

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
      queue_event(id->pub.channel, conn_event(id, RDMA_CM_EVENT_ESTABLISHED, 0, m.conn, 0));
      break;
    case RDMA_CM_EVENT_REJECTED:
      id->state = IdState::kDisconnected;
      queue_event(id->pub.channel, conn_event(id, RDMA_CM_EVENT_REJECTED, m.status, m.conn, kRejPrivateData));
      break;
    case RDMA_CM_EVENT_DISCONNECTED:
      id->state = IdState::kDisconnected;
      queue_event(id->pub.channel, conn_event(id, RDMA_CM_EVENT_DISCONNECTED, 0, m.conn, 0));
      break;
    default:
      id->state = IdState::kDisconnected;
      queue_event(id->pub.channel, conn_event(id, rdma_cm_event_type(m.event), m.status, m.conn, 0));
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
  // Posted: uroced refuses a connect only from a state this id is not in;
  // what happens to it comes as an event, as from the kernel's CM.
  if (int rc = cm_post(&m); rc != 0) {
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
  // Posted, as a connect: a request whose client went is answered by the
  // event that says so (REJECTED or DISCONNECTED), which uroced sent already.
  if (int rc = cm_post(&m); rc != 0) {
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
