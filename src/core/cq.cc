#include "core/cq.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bit>
#include <cstdlib>
#include <cstring>

#include "contract/limits.h"
#include "core/qp.h"
#include "core/service.h"
#include "memory/notify.h"
#include "net/net_engine.h"

namespace uroce::core {

namespace {

int membarrier(int cmd) { return int(syscall(SYS_membarrier, cmd, 0, 0)); }

std::atomic<HostShm*> g_barrier_host{nullptr};

/// This process cannot take part: producers everywhere fence from now on.
void host_fallback_to_fences() {
  if (HostShm* h = g_barrier_host.load()) h->cq_producers_fence.store(1, std::memory_order_seq_cst);
  g_cq_self_fence.store(true);
}

/// The size a CQ reports for a request of `cqe` (ibv_cq.cqe): the next power
/// of two minus one, as mlx5 and rxe round. The ring itself may be larger (64
/// slots at least): programs take cq->cqe as what they may fill, not the ring.
uint32_t reported_size(uint32_t cqe) {
  uint32_t n = 1;
  while (n < cqe + 1) n <<= 1;
  return n - 1;
}

}  // namespace

void cq_barrier_setup(HostShm* host) {
  g_barrier_host.store(host);
  g_cq_host_fence.store(&host->cq_producers_fence);
  static std::once_flag once;
  std::call_once(once, [] {
    // A fork() child is not registered (registration belongs to the address space).
    pthread_atfork(nullptr, nullptr, [] { g_cq_self_fence.store(true); });
  });
  const char* force = getenv("UROCE_CQ_FENCE");  // "1": act as if membarrier were missing
  int q = membarrier(MEMBARRIER_CMD_QUERY);
  if ((force && strcmp(force, "1") == 0) || q < 0 || !(q & MEMBARRIER_CMD_GLOBAL_EXPEDITED) ||
      membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0) {
    host_fallback_to_fences();
    return;
  }
  g_cq_self_fence.store(false);
}

void cq_arm_barrier() {
  if (membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0) host_fallback_to_fences();
}

Result<std::unique_ptr<Cq>> Cq::create(Context* ctx, uint32_t cqe, uint32_t channel_id, uint64_t user_handle,
                                       bool timestamps) {
  uint32_t cap = 64;
  while (cap < cqe + 1) cap <<= 1;
  std::unique_ptr<Cq> cq(new Cq());
  cq->ctx_ = ctx;
  cq->bytes_ = sizeof(CqRing) + cq_slot_array_bytes(cap);
  auto off = ctx->seg().alloc(cq->bytes_);
  if (!off.is_ok()) return Status(off.err());
  cq->off_ = off.value();
  CqRing* r = ctx->seg().at<CqRing>(cq->off_);
  r->capacity = cap;
  r->mask = cap - 1;
  r->owner_pid = getpid();
  r->owner_async_id = ctx->async_id();
  r->channel_id = channel_id;
  r->user_handle = user_handle;
  r->slots_off = cq->off_ + sizeof(CqRing);
  r->want_ts = timestamps;
  cq->ring_ = r;
  cq->geom_.store(cq_geom_pack(r->slots_off, cap), std::memory_order_relaxed);
  cq->reported_cqe_ = reported_size(cqe);
  return cq;
}

Cq::~Cq() {
  if (off_) ctx_->seg().free(off_, bytes_);
  for (auto& [off, bytes] : extra_) ctx_->seg().free(off, bytes);
}

bool Cq::progress() {
  Service::poke_if_deferred();
  return NetEngine::active() && NetEngine::get().poll_now();
}

void Cq::app_sleeps() {
  if (NetEngine::active()) NetEngine::get().app_sleeps();
}

void Cq::push_local(const Cqe& c, bool solicited) {
  // Threads may race on the copy: any value they store is a head once seen, so still safe.
  uint64_t h = head_seen_.load(std::memory_order_relaxed);
  // Checked against this process's own segment: a peer may have scribbled
  // over the ring's geometry (memory/seg_bound.h).
  CqPush r = cq_push(ctx_->seg().base(), ring_, c, solicited, nullptr, &h, &ctx_->seg().bound());
  head_seen_.store(h, std::memory_order_relaxed);
  if (r == CqPush::kOkNotify) cq_notify(ring_);
  if (r == CqPush::kCorrupt) ctx_->own_segment_corrupt();
}

Status Cq::resize(uint32_t cqe) {
  if (cqe == 0 || cqe > kLimits.max_cqe) return Status(EINVAL);
  // One resize at a time (only resize changes the capacity); the slot array
  // is allocated and freed outside the spin lock (the segment's allocator
  // may grow its file), which guards the switch alone.
  std::lock_guard<std::mutex> r(resize_mu_);
  uint32_t cap = capacity();
  if (cqe + 1 <= cap) {
    Guard<SpinLock> g(mu_);
    if (cqe < cq_depth(ring_)) return Status(EINVAL);  // would drop completions
    reported_cqe_ = reported_size(cqe);
    return Status::ok();
  }
  while (cap < cqe + 1) cap <<= 1;
  const size_t bytes = cq_slot_array_bytes(cap);
  auto off = ctx_->seg().alloc(bytes);
  if (!off.is_ok()) return Status(off.err());
  const uint64_t old_geom = geom_.load(std::memory_order_relaxed);
  const uint64_t old_off = old_geom & ((1ull << 48) - 1);
  const size_t old_bytes = cq_slot_array_bytes(capacity());
  bool refused = false, free_old = false;
  {
    Guard<SpinLock> g(mu_);
    if (cqe < cq_depth(ring_)) {
      refused = true;  // would drop completions
    } else {
      const bool clean = cq_resize(ctx_->seg().base(), ring_, off.value(), cap, old_geom);
      geom_.store(cq_geom_pack(off.value(), cap), std::memory_order_release);
      reported_cqe_ = reported_size(cqe);
      extra_.push_back({off.value(), bytes});
      std::erase_if(extra_, [&](const auto& e) { return e.first == old_off && clean; });
      // The first slot array shares its block with the ring header; later
      // ones are freed, unless a producer may still write into it late.
      free_old = old_off != off_ + sizeof(CqRing) && clean;
    }
  }
  if (refused) {
    ctx_->seg().free(off.value(), bytes);
    return Status(EINVAL);
  }
  if (free_old) ctx_->seg().free(old_off, old_bytes);
  return Status::ok();
}

uint32_t Cq::purge_qp(uint32_t qpn) {
  Guard<SpinLock> g(mu_);
  return cq_purge(
      ctx_->seg().base(), ring_, [qpn](const Cqe& c) { return c.qp_num == qpn; },
      geom_.load(std::memory_order_relaxed));
}

int Cq::eager_attach(EagerRing* ring, uint32_t records, Qp* qp, QpShm* shm, RqRing* rq, uint32_t qpn) {
  Guard<SpinLock> g(mu_);
  const uint32_t used = eager_used_.load(std::memory_order_relaxed);
  if (used == (1u << kMaxEager) - 1) return -1;
  const int place = std::countr_one(used);
  EagerRx& e = eager_[place];
  e.mask = records - 1;
  e.qpn = qpn;
  e.qp = qp;
  e.shm = shm;
  e.rq = rq;
  e.cons.store(0, std::memory_order_relaxed);
  e.done.store(0, std::memory_order_relaxed);
  e.mr_cache = MrCache{};
  e.ring.store(ring, std::memory_order_relaxed);
  eager_used_.store(used | (1u << place), std::memory_order_release);
  return place;
}

void Cq::eager_detach(int place) {
  Guard<SpinLock> g(mu_);
  eager_used_.store(eager_used_.load(std::memory_order_relaxed) & ~(1u << place), std::memory_order_release);
  eager_[place].ring.store(nullptr, std::memory_order_relaxed);
  eager_[place].qp = nullptr;
}

void Cq::eager_reset(int place, uint64_t done) {
  Guard<SpinLock> g(mu_);
  EagerRx& e = eager_[place];
  EagerRing* r = e.ring.load(std::memory_order_relaxed);
  const uint64_t prod = r->prod.load(std::memory_order_acquire);
  e.cons.store(prod, std::memory_order_relaxed);
  r->cons.store(prod, std::memory_order_release);
  e.done.store(done, std::memory_order_release);
}

}  // namespace uroce::core
