// Queue pairs: create (classic and _ex), modify, query, destroy, and the
// post_send / post_recv ops that inline ibv_post_* call.
#include <cerrno>
#include <cstring>

#include "common/export.h"
#include "contract/limits.h"
#include "core/qp_state.h"
#include "verbs/objects.h"

namespace uroce::verbs {

static_assert(int(core::QpState::kErr) == IBV_QPS_ERR && int(core::QpState::kSqe) == IBV_QPS_SQE);
static_assert(int(core::QpType::kUd) == IBV_QPT_UD && int(core::QpType::kXrcRecv) == IBV_QPT_XRC_RECV);
static_assert(int(core::WrOpcode::kSendWithInv) == IBV_WR_SEND_WITH_INV);
static_assert(int(core::WrOpcode::kAtomicFetchAndAdd) == IBV_WR_ATOMIC_FETCH_AND_ADD);
static_assert(core::qp_attr::kDestQpn == IBV_QP_DEST_QPN && core::qp_attr::kRateLimit == IBV_QP_RATE_LIMIT);
static_assert(core::qp_attr::kMaxDestRdAtomic == IBV_QP_MAX_DEST_RD_ATOMIC);
static_assert(core::send_flags::kInline == IBV_SEND_INLINE &&
              core::send_flags::kSolicited == IBV_SEND_SOLICITED);
static_assert(sizeof(core::Sge) == sizeof(ibv_sge) && offsetof(ibv_sge, lkey) == offsetof(core::Sge, lkey));

core::AddressVector to_av(const ibv_ah_attr& a) {
  core::AddressVector av{};
  memcpy(av.dgid, a.grh.dgid.raw, 16);
  av.flow_label = a.grh.flow_label;
  av.sgid_index = a.grh.sgid_index;
  av.hop_limit = a.grh.hop_limit;
  av.traffic_class = a.grh.traffic_class;
  av.is_global = a.is_global;
  av.sl = a.sl;
  av.port_num = a.port_num;
  av.dlid = a.dlid;
  return av;
}

ibv_ah_attr from_av(const core::AddressVector& av) {
  ibv_ah_attr a;
  memset(&a, 0, sizeof(a));
  memcpy(a.grh.dgid.raw, av.dgid, 16);
  a.grh.flow_label = av.flow_label;
  a.grh.sgid_index = av.sgid_index;
  a.grh.hop_limit = av.hop_limit;
  a.grh.traffic_class = av.traffic_class;
  a.is_global = av.is_global;
  a.sl = av.sl;
  a.port_num = av.port_num;
  a.dlid = av.dlid;
  return a;
}

namespace {

constexpr uint64_t kSupportedSendOps =
    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
    IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_BIND_MW |
    IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_ATOMIC_WRITE;

/// The hash and table of an RSS QP; 0 or an errno (mlx5's answers).
int rss_config(const ibv_qp_init_attr_ex* a, core::RssConfig* c) {
  constexpr uint32_t kBoth = IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
  if (a->qp_type != IBV_QPT_RAW_PACKET || (a->comp_mask & kBoth) != kBoth || !a->rwq_ind_tbl) return EINVAL;
  const ibv_rx_hash_conf& h = a->rx_hash_conf;
  if (h.rx_hash_function != IBV_RX_HASH_FUNC_TOEPLITZ) return EOPNOTSUPP;
  if (h.rx_hash_key_len != 40 || !h.rx_hash_key) return EINVAL;  // Toeplitz's 40-byte key
  constexpr uint64_t kFields = IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 | IBV_RX_HASH_SRC_IPV6 |
                               IBV_RX_HASH_DST_IPV6 | IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_TCP |
                               IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP;
  if (h.rx_hash_fields_mask & ~kFields) return EOPNOTSUPP;
  std::memcpy(c->key, h.rx_hash_key, h.rx_hash_key_len);
  c->key_len = h.rx_hash_key_len;
  c->fields = h.rx_hash_fields_mask;
  for (UWq* w : uind(a->rwq_ind_tbl)->wqs) c->wq_qpns.push_back(w->core->qpn());
  return 0;
}

ibv_qp* create_qp_common(ibv_context* ctx, ibv_qp_init_attr_ex* a) {
  const bool xrc_ini = a->qp_type == IBV_QPT_XRC_SEND, xrc_tgt = a->qp_type == IBV_QPT_XRC_RECV;
  const bool raw = a->qp_type == IBV_QPT_RAW_PACKET;
  if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD && !xrc_ini &&
      !xrc_tgt && !raw) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  // Receive-side scaling (man ibv_create_qp_ex): a RAW_PACKET QP with an
  // indirection table of work queues and a Toeplitz hash, no queues of its own.
  const bool rss = (a->comp_mask & IBV_QP_INIT_ATTR_IND_TABLE) != 0;
  core::RssConfig rss_cfg;
  if (rss || (a->comp_mask & IBV_QP_INIT_ATTR_RX_HASH)) {
    if (int e = rss_config(a, &rss_cfg)) {
      errno = e;
      return nullptr;
    }
  }
  // XRC (man ibv_create_qp_ex): an initiator has a PD and a send CQ only; a
  // target QP has only its domain. Everyone else needs a PD and both sides.
  if (xrc_tgt ? !((a->comp_mask & IBV_QP_INIT_ATTR_XRCD) && a->xrcd)
              : (!a->pd || (!rss && (!a->send_cq || (!xrc_ini && !a->recv_cq && !a->srq))))) {
    errno = EINVAL;
    return nullptr;
  }
  // A CQ already destroyed: EINVAL, as the kernel answers a stale handle
  // (cmtime's server keeps the first connection's CQs in its attributes).
  if ((a->send_cq && !cq_is_live(a->send_cq)) || (a->recv_cq && !cq_is_live(a->recv_cq))) {
    errno = EINVAL;
    return nullptr;
  }
  UContext* c = uctx(ctx);
  auto* q = new UQp();
  memset(&q->ex, 0, sizeof(q->ex));
  q->upd = a->pd && !xrc_tgt ? upd(a->pd) : nullptr;
  q->send_cq = a->send_cq && !xrc_tgt ? ucq(a->send_cq) : nullptr;
  q->recv_cq = xrc_ini || xrc_tgt ? nullptr : ucq(a->recv_cq ? a->recv_cq : a->send_cq);
  q->srq = a->srq && !xrc_ini && !xrc_tgt ? usrq(a->srq) : nullptr;
  q->xrcd = xrc_tgt ? uxrcd(a->xrcd) : nullptr;
  core::QpCreateArgs args{};
  args.type = core::QpType(a->qp_type);
  args.pd_id = q->upd ? q->upd->id : 0;
  args.xrcd_id = q->xrcd ? q->xrcd->id : 0;
  args.send_cq = q->send_cq ? q->send_cq->core.get() : nullptr;
  args.recv_cq = q->recv_cq ? q->recv_cq->core.get() : nullptr;
  args.srq = q->srq ? q->srq->core.get() : nullptr;
  args.cap = {a->cap.max_send_wr, a->srq ? 0 : a->cap.max_recv_wr, a->cap.max_send_sge,
              a->srq ? 0 : a->cap.max_recv_sge, a->cap.max_inline_data};
  args.sq_sig_all = a->sq_sig_all != 0;
  args.user_handle = reinterpret_cast<uint64_t>(&q->ex.qp_base);
  if (rss) {
    args.rss = &rss_cfg;
    args.recv_cq = args.send_cq = nullptr;
    args.cap = {};
    q->send_cq = q->recv_cq = nullptr;
    q->srq = nullptr;
  }
  auto core = core::Qp::create(c->core.get(), args);
  if (!core.is_ok()) {
    delete q;
    errno = core.err();
    return nullptr;
  }
  q->core = std::move(core.value());
  ibv_qp& b = q->ex.qp_base;
  b.context = ctx;
  b.qp_context = a->qp_context;
  b.pd = q->upd ? a->pd : nullptr;
  b.send_cq = q->send_cq ? a->send_cq : nullptr;
  b.recv_cq = q->recv_cq ? a->recv_cq : nullptr;
  b.srq = q->srq ? a->srq : nullptr;
  b.handle = q->core->qpn();
  b.qp_num = q->core->qpn();
  b.state = IBV_QPS_RESET;
  b.qp_type = a->qp_type;
  b.events_completed = 0;
  pthread_mutex_init(&b.mutex, nullptr);
  pthread_cond_init(&b.cond, nullptr);
  const core::QpCaps& caps = q->core->caps();
  a->cap.max_send_wr = caps.max_send_wr;
  a->cap.max_send_sge = caps.max_send_sge;
  a->cap.max_inline_data = caps.max_inline_data;
  if (!a->srq) {
    a->cap.max_recv_wr = caps.max_recv_wr;
    a->cap.max_recv_sge = caps.max_recv_sge;
  }
  q->ex.comp_mask = (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ? IBV_QP_EX_WITH_SEND : 0;
  init_qp_ex_ops(q);
  if (q->upd) q->upd->refs++;
  if (q->xrcd) q->xrcd->refs++;
  q->ind_table = rss ? uind(a->rwq_ind_tbl) : nullptr;
  if (q->ind_table) q->ind_table->refs++;
  return &b;
}

}  // namespace

/// ibv_open_qp (context op): another handle on an XRC target QP of the domain.
ibv_qp* op_open_qp(ibv_context* ctx, ibv_qp_open_attr* attr) {
  if (attr->comp_mask >= IBV_QP_OPEN_ATTR_RESERVED) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  constexpr uint32_t kNeeded = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  if ((attr->comp_mask & kNeeded) != kNeeded || !attr->xrcd) {
    errno = EINVAL;
    return nullptr;
  }
  UXrcd* x = uxrcd(attr->xrcd);
  auto core = attr->qp_type == IBV_QPT_XRC_RECV
                  ? core::Qp::open_xrc_target(uctx(ctx)->core.get(), attr->qp_num, x->id)
                  : Result<std::unique_ptr<core::Qp>>(Status(EINVAL));
  if (!core.is_ok()) {
    errno = core.err();
    return nullptr;
  }
  auto* q = new UQp();
  memset(&q->ex, 0, sizeof(q->ex));
  q->upd = nullptr;
  q->send_cq = q->recv_cq = nullptr;
  q->srq = nullptr;
  q->xrcd = x;
  q->core = std::move(core.value());
  ibv_qp& b = q->ex.qp_base;
  b.context = ctx;
  b.qp_context = (attr->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) ? attr->qp_context : nullptr;
  b.handle = attr->qp_num;
  b.qp_num = attr->qp_num;
  b.state = IBV_QPS_UNKNOWN;
  b.qp_type = IBV_QPT_XRC_RECV;
  pthread_mutex_init(&b.mutex, nullptr);
  pthread_cond_init(&b.cond, nullptr);
  init_qp_ex_ops(q);
  x->refs++;
  return &b;
}

UROCE_EXPORT ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  ibv_qp_init_attr_ex ex;
  memset(&ex, 0, sizeof(ex));
  memcpy(&ex, attr, sizeof(*attr));
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = pd;
  ibv_qp* q = create_qp_common(pd->context, &ex);
  if (q) attr->cap = ex.cap;
  return q;
}

ibv_qp* op_create_qp_ex(ibv_context* ctx, ibv_qp_init_attr_ex* attr) {
  // CREATE_FLAGS is understood: no flag is supported (below), but an empty set is no request.
  constexpr uint32_t kKnown = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
                              IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_IND_TABLE |
                              IBV_QP_INIT_ATTR_RX_HASH;
  if (attr->comp_mask & ~kKnown) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) && attr->qp_type != IBV_QPT_XRC_RECV) {
    errno = EINVAL;
    return nullptr;
  }
  if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (attr->send_ops_flags & ~kSupportedSendOps)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return create_qp_common(ctx, attr);
}

UROCE_EXPORT ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  UQp* q = uqp(qp);
  if (!q->ex.comp_mask) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return &q->ex;
}

UROCE_EXPORT int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
  UQp* q = uqp(qp);
  core::QpModifyArgs a{};
  a.state = core::QpState(attr->qp_state);
  a.cur_state = core::QpState(attr->cur_qp_state);
  a.access_flags = attr->qp_access_flags;
  a.pkey_index = attr->pkey_index;
  a.qkey = attr->qkey;
  a.path_mtu = attr->path_mtu;
  a.dest_qpn = attr->dest_qp_num;
  a.rq_psn = attr->rq_psn;
  a.sq_psn = attr->sq_psn;
  a.port_num = attr->port_num;
  a.timeout = attr->timeout;
  a.retry_cnt = attr->retry_cnt;
  a.rnr_retry = attr->rnr_retry;
  a.min_rnr_timer = attr->min_rnr_timer;
  a.max_rd_atomic = attr->max_rd_atomic;
  a.max_dest_rd_atomic = attr->max_dest_rd_atomic;
  a.en_sqd_async_notify = attr->en_sqd_async_notify;
  a.rate_limit = attr->rate_limit;
  a.av = to_av(attr->ah_attr);
  if ((attr_mask & IBV_QP_AV) && attr->ah_attr.port_num != 1 && attr->ah_attr.port_num != 0) return EINVAL;
  Status st = q->core->modify(a, uint32_t(attr_mask));
  if (!st) return st.err();
  qp->state = ibv_qp_state(q->core->state());
  return 0;
}

int op_modify_qp_rate_limit(ibv_qp* qp, ibv_qp_rate_limit_attr* attr) {
  // typical_pkt_sz only helps a NIC's scheduler guess; the pace here is
  // computed from each frame's length.
  if (attr->comp_mask) return EINVAL;
  return uqp(qp)->core->set_rate_limit(attr->rate_limit, attr->max_burst_sz).err();
}

UROCE_EXPORT int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr) {
  UQp* q = uqp(qp);
  if (!q->core->exists()) return ENODEV;  // an opened handle whose QP was destroyed
  core::QpModifyArgs a = q->core->query();
  memset(attr, 0, sizeof(*attr));
  attr->qp_state = ibv_qp_state(a.state);
  attr->cur_qp_state = ibv_qp_state(a.state);
  attr->path_mtu = a.path_mtu ? ibv_mtu(a.path_mtu) : IBV_MTU_1024;
  attr->path_mig_state = IBV_MIG_MIGRATED;
  attr->qkey = a.qkey;
  attr->rq_psn = a.rq_psn;
  attr->sq_psn = a.sq_psn;
  attr->dest_qp_num = a.dest_qpn;
  attr->qp_access_flags = a.access_flags;
  attr->cap.max_send_wr = a.cap.max_send_wr;
  attr->cap.max_recv_wr = a.cap.max_recv_wr;
  attr->cap.max_send_sge = a.cap.max_send_sge;
  attr->cap.max_recv_sge = a.cap.max_recv_sge;
  attr->cap.max_inline_data = a.cap.max_inline_data;
  attr->ah_attr = from_av(a.av);
  attr->pkey_index = uint16_t(a.pkey_index);
  attr->en_sqd_async_notify = a.en_sqd_async_notify;
  attr->sq_draining = 0;
  attr->max_rd_atomic = a.max_rd_atomic;
  attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
  attr->min_rnr_timer = a.min_rnr_timer;
  attr->port_num = a.port_num ? a.port_num : 1;
  attr->timeout = a.timeout;
  attr->retry_cnt = a.retry_cnt;
  attr->rnr_retry = a.rnr_retry;
  if (init_attr) {
    memset(init_attr, 0, sizeof(*init_attr));
    init_attr->qp_context = qp->qp_context;
    init_attr->send_cq = qp->send_cq;
    init_attr->recv_cq = qp->recv_cq;
    init_attr->srq = qp->srq;
    init_attr->cap = attr->cap;
    init_attr->qp_type = qp->qp_type;
    init_attr->sq_sig_all = q->core->sq_sig_all();
  }
  qp->state = attr->qp_state;
  (void)attr_mask;
  return 0;
}

UROCE_EXPORT int ibv_destroy_qp(ibv_qp* qp) {
  UQp* q = uqp(qp);
  // As the kernel: a QP still attached to a multicast group stays.
  if (q->core && q->core->mcast_attached()) return EBUSY;
  // And one that flow steering rules still name (their ibv_destroy_flow first).
  if (q->core && q->core->has_flows()) return EBUSY;
  if (q->upd) q->upd->refs--;
  if (q->xrcd) q->xrcd->refs--;
  if (q->ind_table) q->ind_table->refs--;
  pthread_mutex_destroy(&qp->mutex);
  pthread_cond_destroy(&qp->cond);
  delete q;
  return 0;
}

int post_send_one(UQp* q, const ibv_send_wr* wr) {
  core::SendWqe w;
  w.wr_id = wr->wr_id;
  w.opcode = core::WrOpcode(wr->opcode);
  w.flags = wr->send_flags;
  w.imm = wr->imm_data;
  if (wr->num_sge < 0) return EINVAL;
  w.num_sge = uint32_t(wr->num_sge);
  w.sge = reinterpret_cast<const core::Sge*>(wr->sg_list);
  switch (wr->opcode) {
    case IBV_WR_BIND_MW:
      // A type 2 window bound to the key the WR names (a type 1 window too,
      // as libmlx5 takes it); the window answers to that key once posted.
      if (!wr->bind_mw.mw) return EINVAL;
      w.bind = window_bind(wr->bind_mw.mw, wr->bind_mw.rkey, wr->bind_mw.bind_info);
      w.num_sge = 0;
      if (int e = q->core->post_send(w).err()) return e;
      wr->bind_mw.mw->rkey = wr->bind_mw.rkey;
      return 0;
    case IBV_WR_LOCAL_INV:
      w.imm = wr->invalidate_rkey;
      w.num_sge = 0;
      break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      w.remote_addr = wr->wr.atomic.remote_addr;
      w.rkey = wr->wr.atomic.rkey;
      w.compare_add = wr->wr.atomic.compare_add;
      w.swap = wr->wr.atomic.swap;
      break;
    default:
      if (q->ex.qp_base.qp_type == IBV_QPT_UD) {
        if (!wr->wr.ud.ah) return EINVAL;
        w.av = &uah(wr->wr.ud.ah)->av;
        w.remote_qpn = wr->wr.ud.remote_qpn;
        w.remote_qkey = wr->wr.ud.remote_qkey;
      } else {
        w.remote_addr = wr->wr.rdma.remote_addr;
        w.rkey = wr->wr.rdma.rkey;
      }
  }
  if (q->ex.qp_base.qp_type == IBV_QPT_XRC_SEND) w.xrc_srqn = wr->qp_type.xrc.remote_srqn;
  return q->core->post_send(w).err();
}

int op_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  UQp* q = uqp(qp);
  for (; wr; wr = wr->next) {
    if (int e = post_send_one(q, wr)) {
      *bad = wr;
      return e;
    }
  }
  return 0;
}

int op_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  core::Qp* q = uqp(qp)->core.get();
  return post_recv_chain(wr, bad,
                         [q](uint64_t id, const core::Sge* s, uint32_t n) { return q->post_recv(id, s, n); });
}

// --- address handles

UROCE_EXPORT ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  UContext* c = uctx(pd->context);
  // Every port is RoCE, whose packets route by the GRH (IBA A17.4.5.1): an
  // AH without one is EINVAL, as the kernel answers for rxe and mlx5.
  if (attr->port_num != 1 || !attr->is_global || attr->grh.sgid_index >= c->udev->info.num_gids) {
    errno = EINVAL;
    return nullptr;
  }
  auto* a = new UAh();
  memset(&a->ah, 0, sizeof(a->ah));
  a->ah.context = pd->context;
  a->ah.pd = pd;
  a->av = to_av(*attr);
  a->upd = upd(pd);
  a->upd->refs++;
  return &a->ah;
}

UROCE_EXPORT int ibv_destroy_ah(ibv_ah* ah) {
  UAh* a = uah(ah);
  a->upd->refs--;
  delete a;
  return 0;
}

UROCE_EXPORT int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                                     ibv_ah_attr* ah_attr) {
  memset(ah_attr, 0, sizeof(*ah_attr));
  ah_attr->port_num = port_num;
  ah_attr->sl = wc->sl;
  ah_attr->dlid = wc->slid;
  if (!(wc->wc_flags & IBV_WC_GRH)) {
    // RoCE needs a GRH to route (IBA A17.4.5.1).
    errno = EINVAL;
    return -1;
  }
  const uint8_t* g = reinterpret_cast<const uint8_t*>(grh);
  ah_attr->is_global = 1;
  ah_attr->grh.hop_limit = 0xff;
  UDevice* d = uctx(context)->udev;
  uint8_t dgid[16], sgid[16];
  if ((g[20] >> 4) == 4) {
    // RoCE v2 over IPv4: the IPv4 header sits in the second half.
    static const uint8_t kV4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    memcpy(dgid, kV4, 12);
    memcpy(dgid + 12, g + 20 + 12, 4);  // the sender's address is our destination
    memcpy(sgid, kV4, 12);
    memcpy(sgid + 12, g + 20 + 16, 4);
    ah_attr->grh.traffic_class = g[21];
  } else {
    memcpy(dgid, g + 8, 16);
    memcpy(sgid, g + 24, 16);
    uint32_t w0 = uint32_t(g[0]) << 24 | uint32_t(g[1]) << 16 | uint32_t(g[2]) << 8 | g[3];
    ah_attr->grh.traffic_class = uint8_t(w0 >> 20);
    ah_attr->grh.flow_label = w0 & 0xfffff;
  }
  memcpy(ah_attr->grh.dgid.raw, dgid, 16);
  // Our GID that received it becomes the source GID.
  for (uint32_t i = 0; i < d->info.num_gids; ++i) {
    if (memcmp(d->info.gids[i], sgid, 16) == 0) {
      ah_attr->grh.sgid_index = uint8_t(i);
      return 0;
    }
  }
  errno = ENOENT;
  return -1;
}

UROCE_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  ibv_ah_attr a;
  if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &a)) return nullptr;
  return ibv_create_ah(pd, &a);
}

// Multicast: the LID is ignored, as over RoCE (the GID names the group).
UROCE_EXPORT int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  (void)lid;
  Status st = uqp(qp)->core->attach_mcast(gid->raw);
  return st ? 0 : st.err();
}
UROCE_EXPORT int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  (void)lid;
  Status st = uqp(qp)->core->detach_mcast(gid->raw);
  return st ? 0 : st.err();
}

}  // namespace uroce::verbs
