// Completion queue (owner side): a CqRing in the context's segment, polled
// under a process-local lock; producers anywhere on the host.
#pragma once

#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "common/spin_lock.h"
#include "common/status.h"
#include "core/context.h"
#include "core/eager.h"
#include "memory/cq_ring.h"

namespace uroce::core {
/// A completion retired `n` send-queue slots of local QP `local_id` (core/qp.cc).
void qp_retire(uint32_t local_id, uint32_t n);

/// Once per process (after the host memory is mapped): registers for
/// MEMBARRIER_CMD_GLOBAL_EXPEDITED so this process's completion producers can
/// skip their fence; a process that cannot sets HostShm::cq_producers_fence.
void cq_barrier_setup(HostShm* host);
/// Consumer, right after storing `armed`: makes every producer's earlier
/// publish visible here and this store visible to its later arm check.
void cq_arm_barrier();

class Cq {
 public:
  /// A CQ with room for at least `cqe` completions. `channel_id` 0 = no channel.
  /// `timestamps`: completions carry the time they were pushed.
  static Result<std::unique_ptr<Cq>> create(Context* ctx, uint32_t cqe, uint32_t channel_id,
                                            uint64_t user_handle, bool timestamps = false);
  ~Cq();

  /// ibv_poll_cq: hands up to `n` completions to `take` in place (no
  /// intermediate copy), retiring the send-queue slots they account for.
  /// A poll that finds none makes progress, as a NIC's CQ shows what
  /// arrived: deferred intra-host sends are retried, the network engine
  /// takes in what came (NetEngine::poll_now), and if it handled anything
  /// the CQ is looked at again. A busy-polling program needs no thread of
  /// ours to wake for it.
  template <typename Take>
  int poll_each(int n, Take&& take) {
    const int got = take_ready(n, take);
    if (got || !progress()) return got;
    return take_ready(n, take);
  }
  /// poll_each into an array.
  int poll(int n, Cqe* out) {
    int i = 0;
    return poll_each(n, [&](const Cqe& c) { out[i++] = c; });
  }
  /// The completions ready now, without progress (ibv_next_poll: within
  /// the batch ibv_start_poll began).
  int poll_ready(int n, Cqe* out) {
    int i = 0;
    auto take = [&](const Cqe& c) { out[i++] = c; };
    return take_ready(n, take);
  }
  /// Arms the completion channel for the next (or next solicited)
  /// completion; the caller is about to block for it, so the network
  /// engine's thread takes the packets in again (NetEngine::app_sleeps).
  void arm(bool solicited_only) {
    ring_->armed.store(solicited_only ? kArmSolicited : kArmNext, std::memory_order_seq_cst);
    cq_arm_barrier();
    app_sleeps();
  }
  /// Pushes a completion produced in this process (send side, flushes).
  void push_local(const Cqe& c, bool solicited);
  /// Resizes to hold at least `cqe` completions, keeping those queued;
  /// producers in other processes keep running (see cq_resize).
  Status resize(uint32_t cqe);
  /// Drops the completions of QP `qpn` still queued: a QP moved to RESET
  /// starts clean, as mlx5 cleans its CQs then (see cq_purge). Returns how many.
  uint32_t purge_qp(uint32_t qpn);

  // --- one-line records of small SENDs (core/eager.h), for the QPs whose
  // receive CQ this is (at most kMaxEager of them)
  static constexpr int kMaxEager = 8;
  /// A QP's ring joins this CQ's polls: its place, or -1 if all are taken.
  int eager_attach(EagerRing* ring, uint32_t records, Qp* qp, QpShm* shm, RqRing* rq, uint32_t qpn);
  void eager_detach(int place);
  /// A QP moved to RESET: its unread records are dropped and its receives
  /// completed up to `done` (the receive queue's head).
  void eager_reset(int place, uint64_t done);
  /// The receives of the QP at `place` whose completions were polled (rq_post's `done`).
  const std::atomic<uint64_t>* eager_done(int place) const { return &eager_[place].done; }

  uint32_t capacity() const { return 1u << (geom_.load(std::memory_order_relaxed) >> 48); }
  uint32_t reported_cqe() const { return reported_cqe_; }
  uint64_t off() const { return off_; }
  Context* ctx() const { return ctx_; }
  std::atomic<int> refs{0};  ///< QPs/SRQs using this CQ (destroy -> EBUSY)

 private:
  Cq() = default;
  /// An empty poll's progress (core/cq.cc); true if the network engine
  /// handled anything.
  static bool progress();
  /// The network engine's hint that the application will block (core/cq.cc).
  static void app_sleeps();
  /// Hands up to `n` ready completions to `take`.
  template <typename Take>
  int take_ready(int n, Take& take) {
    const uint32_t eager = eager_used_.load(std::memory_order_acquire);
    // The busy-poll case: no lock.
    if (!cq_peek_ready(ctx_->seg().base(), ring_, geom_.load(std::memory_order_acquire)) &&
        !(eager && eager_any_ready(eager)))
      return 0;
    Guard<SpinLock> g(mu_);
    if (eager_used_.load(std::memory_order_relaxed)) return poll_merged(n, take);
    return cq_pop_each(
        ctx_->seg().base(), ring_, n,
        [&](const Cqe& c) {
          if (c.sq_retire) qp_retire(c.local_qp, c.sq_retire);
          take(c);
        },
        geom_.load(std::memory_order_relaxed));
  }
  bool eager_any_ready(uint32_t used) const {
    for (; used; used &= used - 1)
      if (eager_ready(eager_[std::countr_zero(used)])) return true;
    return false;
  }
  EagerRx* eager_of(uint32_t qpn) {
    for (uint32_t u = eager_used_.load(std::memory_order_relaxed); u; u &= u - 1)
      if (eager_[std::countr_zero(u)].qpn == qpn) return &eager_[std::countr_zero(u)];
    return nullptr;
  }
  /// take_ready with records (under mu_): the records and the ring's
  /// completions of each QP handed out in the order of its receives.
  template <typename Take>
  int poll_merged(int n, Take& take) {
    uint8_t* base = ctx_->seg().base();
    const bool stamp = ring_->want_ts;
    int got = 0;
    Cqe c;
    // The records of `e` whose turn has come, within `budget`.
    auto records = [&](EagerRx& e, int budget) {
      int k = 0;
      while (k < budget && eager_next(ctx_, e, &c)) {
        if (stamp) c.timestamp_ns = now_ns();
        take(static_cast<const Cqe&>(c));
        ++k;
      }
      return k;
    };
    // Records and the ring's completions are taken in turns (which goes
    // first alternates between calls, and so does the first ring), so
    // neither starves the other when a program polls one completion at a
    // time: rping's CQ thread polled records of replies while its own send
    // completions waited in the ring until its send queue looked full.
    const bool ring_first = (turn_ ^= 1) != 0;
    const uint32_t start = turn_ring_ = (turn_ring_ + 1) % kMaxEager;
    auto records_pass = [&] {
      const uint32_t used = eager_used_.load(std::memory_order_relaxed);
      for (uint32_t k = 0; k < kMaxEager && got < n; ++k) {
        const uint32_t i = (start + k) % kMaxEager;
        if (used & (1u << i)) got += records(eager_[i], n - got);
      }
    };
    auto ring_pass = [&] {
      EagerRx* gated = nullptr;  // the gate's lookup, for the take of the same completion
      got += cq_pop_each(
          base, ring_, n - got,
          [&](const Cqe& x) {
            if (x.sq_retire) qp_retire(x.local_qp, x.sq_retire);
            if (gated) gated->done.fetch_add(1, std::memory_order_release);
            take(x);
          },
          geom_.load(std::memory_order_relaxed),
          [&](const Cqe& x, int budget, int* extra) {
            gated = (x.opcode & kWcRecvBit) ? eager_of(x.qp_num) : nullptr;
            if (!gated) return true;
            *extra = records(*gated, budget);
            return *extra < budget;  // else a record may still be due first
          });
    };
    for (;;) {
      const int before = got;
      if (ring_first) {
        ring_pass();
        if (got < n) records_pass();
      } else {
        records_pass();
        if (got < n) ring_pass();
      }
      if (got == before || got >= n) break;
    }
    return got;
  }

  Context* ctx_ = nullptr;
  CqRing* ring_ = nullptr;
  /// The slot array and capacity, kept here (cq_geom_pack): the ring's copy
  /// is for producers. Changed by resize under mu_; the lock-free peek
  /// loads it whole.
  std::atomic<uint64_t> geom_{0};
  uint64_t off_ = 0;
  size_t bytes_ = 0;
  uint32_t reported_cqe_ = 0;
  std::vector<std::pair<uint64_t, size_t>> extra_;  // slot arrays from resizes (under mu_)
  SpinLock mu_;                                     // consumers against a resize's switch of slot arrays
  std::mutex resize_mu_;                            // one resize at a time
  std::atomic<uint64_t> head_seen_{0};  // producers' private copy of the ring's head (see cq_push)
  EagerRx eager_[kMaxEager];
  std::atomic<uint32_t> eager_used_{0};  // a bit per place in use (changed under mu_)
  uint32_t turn_ = 0, turn_ring_ = 0;    // poll_merged's turns (under mu_)
};

}  // namespace uroce::core
