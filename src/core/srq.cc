#include "core/srq.h"

#include <unistd.h>

#include "contract/limits.h"
#include "core/cq.h"
#include "net/net_engine.h"

namespace uroce::core {

Result<uint64_t> rq_ring_create(Context* ctx, uint32_t max_wr, uint32_t max_sge, size_t* bytes) {
  uint32_t slots = 1;
  while (slots < max_wr) slots <<= 1;
  if (max_sge == 0) max_sge = 1;
  uint32_t stride = uint32_t(sizeof(RqWqe) + sizeof(Sge) * max_sge);
  stride = (stride + 15) & ~15u;
  *bytes = sizeof(RqRing) + size_t(slots) * stride;
  auto off = ctx->seg().alloc(*bytes);
  if (!off.is_ok()) return off;
  RqRing* r = ctx->seg().at<RqRing>(off.value());
  r->max_wr = max_wr;
  r->mask = slots - 1;
  r->max_sge = max_sge;
  r->stride = stride;
  r->owner_pid = getpid();
  r->owner_ctx_handle = ctx->async_id();
  r->slots_off = off.value() + sizeof(RqRing);
  return off;
}

Result<std::unique_ptr<Srq>> Srq::create(Context* ctx, uint32_t max_wr, uint32_t max_sge, uint32_t limit,
                                         uint64_t user_handle, const XrcSrqArgs* xrc) {
  if (max_wr == 0 || max_wr > kLimits.max_srq_wr || max_sge > kLimits.max_srq_sge) return Status(EINVAL);
  std::unique_ptr<Srq> s(new Srq());
  s->ctx_ = ctx;
  auto off = rq_ring_create(ctx, max_wr, max_sge, &s->bytes_);
  if (!off.is_ok()) return Status(off.err());
  s->off_ = off.value();
  s->ring_ = ctx->seg().at<RqRing>(s->off_);
  s->ring_->is_srq = 1;
  s->ring_->user_handle = user_handle;
  s->ring_->srq_limit.store(limit);
  if (xrc) {
    s->ring_->xrcd_id = xrc->xrcd_id;
    s->ring_->pd_id = xrc->pd_id;
    s->ring_->cq_off = xrc->cq->off();
    auto n = ctx->ctl()->alloc_qpn(ctx->ctx_id(), s->off_, true);
    if (!n.is_ok()) return Status(n.err());
    s->ring_->srq_num = n.value();
    s->xrc_cq_ = xrc->cq;
    xrc->cq->refs++;
    s->ring_->magic.store(kRqMagic, std::memory_order_release);
  }
  return s;
}

Srq::~Srq() {
  if (ring_ && ring_->srq_num) {
    ring_->magic.store(0, std::memory_order_release);
    ctx_->ctl()->free_qpn(ring_->srq_num);
  }
  if (xrc_cq_) xrc_cq_->refs--;
  if (off_) ctx_->seg().free(off_, bytes_);
}

Status Srq::post(uint64_t wr_id, const Sge* sge, uint32_t num_sge) {
  NetEngine::catch_up();  // packets that came before this receive go first
  if (num_sge > ring_->max_sge) return Status(EINVAL);
  Guard<SpinLock> g(mu_);
  if (!rq_post(ctx_->seg().base(), ring_, wr_id, sge, num_sge, &head_seen_, &ctx_->seg().bound())) {
    if (!ctx_->seg().bound().corrupt.load(std::memory_order_relaxed)) return Status(ENOMEM);
    ctx_->own_segment_corrupt();
    return Status(EIO);
  }
  return Status::ok();
}

}  // namespace uroce::core
