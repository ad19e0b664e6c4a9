// Work queues and their indirection tables (ibv_create_wq(3),
// ibv_create_rwq_ind_table(3)): receive-side scaling for RAW_PACKET QPs. A
// work queue is a receive queue with its CQ — in the core, a RAW_PACKET QP
// with no send side (its number is the WQ number); an RSS QP
// (ibv_create_qp_ex with an indirection table and rx_hash_conf, qp.cc)
// hands each frame its rules claim to the queue the frame's hash picks.
#include <cerrno>
#include <cstring>

#include "core/qp.h"
#include "verbs/objects.h"

namespace uroce::verbs {

namespace {

/// The largest indirection table (log2), as ibv_query_device_ex says.
constexpr uint32_t kMaxLogIndTable = 8;

int op_post_wq_recv(ibv_wq* wq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  core::Qp* q = uwq(wq)->core.get();
  return post_recv_chain(wr, bad,
                         [q](uint64_t id, const core::Sge* s, uint32_t n) { return q->post_recv(id, s, n); });
}

}  // namespace

ibv_wq* op_create_wq(ibv_context* ctx, ibv_wq_init_attr* a) {
  if (a->comp_mask >= IBV_WQ_INIT_ATTR_RESERVED || a->wq_type != IBV_WQT_RQ || !a->pd || !a->cq ||
      !cq_is_live(a->cq)) {
    errno = EINVAL;
    return nullptr;
  }
  // Stripping VLAN tags, scattering the FCS, padding: none here.
  if ((a->comp_mask & IBV_WQ_INIT_ATTR_FLAGS) && a->create_flags) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  auto* w = new UWq();
  std::memset(&w->wq, 0, sizeof(w->wq));
  w->upd = upd(a->pd);
  w->cq = ucq(a->cq);
  core::QpCreateArgs args{};
  args.type = core::QpType::kRawPacket;
  args.work_queue = true;
  args.pd_id = w->upd->id;
  args.recv_cq = w->cq->core.get();
  args.cap = {0, a->max_wr, 0, a->max_sge, 0};
  args.user_handle = reinterpret_cast<uint64_t>(&w->wq);
  auto q = core::Qp::create(uctx(ctx)->core.get(), args);
  if (!q.is_ok()) {
    delete w;
    errno = q.err();
    return nullptr;
  }
  w->core = std::move(q.value());
  ibv_wq& b = w->wq;
  b.context = ctx;
  b.wq_context = a->wq_context;
  b.pd = a->pd;
  b.cq = a->cq;
  b.wq_num = w->core->qpn();
  b.handle = w->core->qpn();
  b.state = IBV_WQS_RESET;
  b.wq_type = IBV_WQT_RQ;
  b.post_recv = op_post_wq_recv;
  pthread_mutex_init(&b.mutex, nullptr);
  pthread_cond_init(&b.cond, nullptr);
  a->max_wr = w->core->caps().max_recv_wr;
  a->max_sge = w->core->caps().max_recv_sge;
  w->upd->refs++;
  return &b;
}

int op_modify_wq(ibv_wq* wq, ibv_wq_attr* a) {
  if (a->attr_mask >= IBV_WQ_ATTR_RESERVED) return EINVAL;
  if ((a->attr_mask & IBV_WQ_ATTR_FLAGS) && a->flags_mask) return EOPNOTSUPP;
  UWq* w = uwq(wq);
  const ibv_wq_state cur = wq->state;
  if ((a->attr_mask & IBV_WQ_ATTR_CURR_STATE) && a->curr_wq_state != cur) return EINVAL;
  if (!(a->attr_mask & IBV_WQ_ATTR_STATE)) return 0;
  const ibv_wq_state next = a->wq_state;
  if (next > IBV_WQS_ERR) return EINVAL;
  // RESET -> RDY -> ERR, and back to RESET from either: as the QP it is
  // (RDY receives: RTR).
  core::QpModifyArgs m{};
  m.port_num = 1;
  auto to = [&](core::QpState s, uint32_t mask) {
    m.state = s;
    return w->core->modify(m, core::qp_attr::kState | mask);
  };
  Status st;
  if (next == IBV_WQS_RESET) {
    st = to(core::QpState::kReset, 0);
  } else if (next == IBV_WQS_ERR) {
    st = to(core::QpState::kErr, 0);
  } else if (next == IBV_WQS_RDY) {
    if (cur == IBV_WQS_RESET) st = to(core::QpState::kInit, core::qp_attr::kPort);
    if (st.is_ok() && cur != IBV_WQS_RDY)
      st = cur == IBV_WQS_ERR ? Status(EINVAL) : to(core::QpState::kRtr, 0);
  } else {
    st = Status(EINVAL);
  }
  if (!st.is_ok()) return st.err();
  wq->state = next;
  return 0;
}

int op_destroy_wq(ibv_wq* wq) {
  UWq* w = uwq(wq);
  if (w->refs.load() > 0) return EBUSY;  // an indirection table names it
  w->upd->refs--;
  pthread_mutex_destroy(&wq->mutex);
  pthread_cond_destroy(&wq->cond);
  delete w;
  return 0;
}

ibv_rwq_ind_table* op_create_rwq_ind_table(ibv_context* ctx, ibv_rwq_ind_table_init_attr* a) {
  if (a->comp_mask >= IBV_CREATE_IND_TABLE_RESERVED || a->log_ind_tbl_size > kMaxLogIndTable || !a->ind_tbl) {
    errno = EINVAL;
    return nullptr;
  }
  auto* t = new UIndTable();
  std::memset(&t->table, 0, sizeof(t->table));
  const uint32_t n = 1u << a->log_ind_tbl_size;
  for (uint32_t i = 0; i < n; ++i) {
    if (!a->ind_tbl[i]) {
      delete t;
      errno = EINVAL;
      return nullptr;
    }
    t->wqs.push_back(uwq(a->ind_tbl[i]));
  }
  for (UWq* w : t->wqs) w->refs++;
  t->table.context = ctx;
  t->table.ind_tbl_handle = int(t->wqs.front()->core->qpn());
  t->table.ind_tbl_num = t->table.ind_tbl_handle;
  return &t->table;
}

int op_destroy_rwq_ind_table(ibv_rwq_ind_table* table) {
  UIndTable* t = uind(table);
  if (t->refs.load() > 0) return EBUSY;  // an RSS QP uses it
  for (UWq* w : t->wqs) w->refs--;
  delete t;
  return 0;
}

}  // namespace uroce::verbs
