// The receive side of a QP: posting receives, flushing them when the QP
// goes to ERR, and the receiving end of the small SEND in one cache line
// (core/eager.h).
#include <cstring>

#include "core/eager.h"
#include "core/qp.h"
#include "memory/notify.h"
#include "memory/trace.h"
#include "net/net_engine.h"

namespace uroce::core {

Status Qp::post_recv(uint64_t wr_id, const Sge* sge, uint32_t num_sge) {
  if (tracing()) {
    uint64_t len = 0;
    for (uint32_t i = 0; i < num_sge; ++i) len += sge[i].length;
    trace(qpn_, "post_recv wr_id=%llu len=%llu", (unsigned long long)wr_id, (unsigned long long)len);
  }
  if (srq_ || !rq_) return Status(EINVAL);
  if (num_sge > cap_.max_recv_sge) return Status(EINVAL);
  QpState s = state();
  if (s == QpState::kReset) return Status(EINVAL);
  NetEngine::catch_up();
  Guard<SpinLock> g(rq_mu_);
  const std::atomic<uint64_t>* done = nullptr;
  if (eager_place_ >= 0) {
    if (eager_limit_) eager_vouch(sge, num_sge);
    done = recv_cq_->eager_done(eager_place_);
  }
  if (!rq_post(ctx_->seg().base(), rq_, wr_id, sge, num_sge, &rq_head_seen_, &ctx_->seg().bound(), done)) {
    if (!ctx_->seg().bound().corrupt.load(std::memory_order_relaxed)) return Status(ENOMEM);
    ctx_->own_segment_corrupt();
    return Status(EIO);
  }
  if (s == QpState::kErr) flush_rq();
  return Status::ok();
}

void Qp::flush_rq() {
  if (!rq_) return;  // XRC: no receive queue of its own
  if (srq_) {
    // IBA 10.3.1 / 11.6.3: the QP takes no more receives from its SRQ; said once per move to ERR.
    if (type_ != QpType::kUd && !last_wqe_raised_.exchange(true, std::memory_order_relaxed)) {
      NotifyMsg m{kNotifyAsync, uint32_t(AsyncEvent::kQpLastWqeReached), shm_->user_handle};
      notify_post(getpid(), ctx_->async_id(), m);
    }
    return;
  }
  ClaimedRecv r;
  uint64_t left;
  while (rq_claim(ctx_->seg().base(), rq_, &r, &left, nullptr, &ctx_->seg().bound())) {
    Cqe c{};
    c.wr_id = r.wr_id;
    c.status = uint32_t(WcStatus::kWrFlushErr);
    c.opcode = uint32_t(WcOpcode::kRecv);
    c.qp_num = qpn_;
    if (tracing()) trace(qpn_, "recv completion wr_id=%llu WR_FLUSH_ERR", (unsigned long long)r.wr_id);
    recv_cq_->push_local(c, true);
  }
}

void Qp::eager_create() {
  if (!eager_enabled()) return;
  const uint32_t records = eager_ring_records(cap_.max_recv_wr);
  auto off = ctx_->seg().alloc(eager_ring_bytes(records));
  if (!off.is_ok()) return;  // the usual delivery serves it
  auto* r = ctx_->seg().at<EagerRing>(off.value());
  memset(static_cast<void*>(r), 0, eager_ring_bytes(records));
  r->size = records;
  eager_limit_ = kEagerPayload + 1;
  r->limit.store(eager_limit_, std::memory_order_relaxed);
  eager_place_ = recv_cq_->eager_attach(r, records, this, shm_, rq_, qpn_);
  if (eager_place_ < 0) {  // the CQ serves enough rings already
    ctx_->seg().free(off.value(), eager_ring_bytes(records));
    return;
  }
  eager_ = r;
  eager_off_ = off.value();
  eager_bytes_ = eager_ring_bytes(records);
  shm_->eager_off = eager_off_;
}

void Qp::eager_vouch(const Sge* sge, uint32_t num_sge) {
  uint64_t cap = 0;
  bool keys_ok = true;
  for (uint32_t i = 0; i < num_sge && keys_ok; ++i) {
    const Sge& s = sge[i];
    if (s.length == 0) continue;
    const MrView* mr = mr_read_cached(ctx_->mr_entry(s.lkey), s.lkey, &rq_mr_cache_);
    keys_ok = mr && mr->pd_id == pd_id_ && (mr->access & access::kLocalWrite) &&
              !(mr->access & access::kWindow) && mr_contains(*mr, s.addr, s.length);
    cap += s.length;
  }
  // A key that is not valid now: the usual delivery finds it and reports it.
  const uint32_t lim = keys_ok ? uint32_t(std::min<uint64_t>(cap, kEagerPayload) + 1) : 0;
  if (lim < eager_limit_) {
    eager_limit_ = lim;
    eager_->limit.store(lim, std::memory_order_relaxed);  // published by rq_post's release of the tail
  }
}

void Qp::responder_error(AsyncEvent ev) {
  to_error(QpFailure{true, ev, "responder error at a one-line record"});
}

}  // namespace uroce::core
