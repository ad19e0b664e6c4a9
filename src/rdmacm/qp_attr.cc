// The QP side of a connection: what each side says about its QP (the
// fields of a REQ or REP), and the attributes that move a QP through RTR
// and RTS from both sides' parts, as the kernel's CM computes them
// (rdma_init_qp_attr; the library's own moves at rdma_accept and when the
// answer comes).
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rdmacm/cm.h"

namespace uroce::rdmacm {
namespace {

constexpr uint8_t kAckTimeout = 14;  // 4.096 us * 2^14 = 67 ms

uint32_t random_psn() {
  uint32_t r = 0;
  if (getrandom(&r, sizeof(r), 0) != sizeof(r)) r = 0x123456;
  return r & 0xffffff;
}

}  // namespace

/// The program's private data, checked against what the message can carry.
bool copy_private(cmproto::Conn* c, const void* data, uint8_t len, uint8_t max) {
  if (len > max) return false;
  c->private_data_len = len;
  if (len && data) memcpy(c->private_data, data, len);
  return true;
}

/// Device limits and the port's MTU, and the first PSN this side receives,
/// chosen once per id: a program may move its QP (rdma_init_qp_attr) before
/// it calls rdma_accept, whose REP must then carry the PSN the QP got.
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
    // Each side names the PSN it will receive, and sends with the one the
    // other side named: the kernel's CM reads a REQ's or REP's Starting
    // PSN so (the receiver's sq_psn, the sender's rq_psn), and so do we.
    a->rq_psn = id->own.psn;
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
    ah.grh.flow_label = id->flow_label;
    ah.port_num = id->pub.port_num;
    *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_ACCESS_FLAGS;
    return 0;
  }
  if (state == IBV_QPS_RTS) {
    a->sq_psn = id->remote.psn;
    a->timeout = id->ack_timeout_set ? id->ack_timeout : kAckTimeout;
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

}  // namespace uroce::rdmacm
