// Shared receive queue (owner side): an RqRing that several QPs consume.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "common/spin_lock.h"
#include "common/status.h"
#include "core/context.h"
#include "memory/rq_ring.h"

namespace uroce::core {

/// Allocates an RqRing for `max_wr` receives of `max_sge` entries in `ctx`'s segment.
Result<uint64_t> rq_ring_create(Context* ctx, uint32_t max_wr, uint32_t max_sge, size_t* bytes);

class Cq;

/// What makes an SRQ an XRC SRQ (IBA 11.5): its domain, PD and completion queue.
struct XrcSrqArgs {
  uint32_t xrcd_id;
  uint32_t pd_id;
  Cq* cq;
};

class Srq {
 public:
  /// A basic SRQ, or an XRC SRQ when `xrc` is given (it then gets a host-wide SRQ number).
  static Result<std::unique_ptr<Srq>> create(Context* ctx, uint32_t max_wr, uint32_t max_sge, uint32_t limit,
                                             uint64_t user_handle, const XrcSrqArgs* xrc = nullptr);
  ~Srq();
  /// Posts one receive; ENOMEM when full.
  Status post(uint64_t wr_id, const Sge* sge, uint32_t num_sge);
  void set_limit(uint32_t limit) { ring_->srq_limit.store(limit, std::memory_order_release); }
  uint32_t limit() const { return ring_->srq_limit.load(std::memory_order_acquire); }
  uint32_t max_wr() const { return ring_->max_wr; }
  uint32_t max_sge() const { return ring_->max_sge; }
  uint64_t off() const { return off_; }
  /// XRC SRQ number (0 for a basic SRQ).
  uint32_t srq_num() const { return ring_->srq_num; }
  std::atomic<int> refs{0};  ///< QPs attached (destroy -> EBUSY)

 private:
  Srq() = default;
  Context* ctx_ = nullptr;
  RqRing* ring_ = nullptr;
  uint64_t off_ = 0;
  size_t bytes_ = 0;
  Cq* xrc_cq_ = nullptr;
  SpinLock mu_;
  uint64_t head_seen_ GUARDED_BY(mu_) = 0;  // private copy of the ring's head (see rq_post)
};

}  // namespace uroce::core
