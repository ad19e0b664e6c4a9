// The intra-host link's engine of one QP: its requester and completer. The
// initiator acts as the target's NIC (memory/target.h): a WQE executes at
// post time, in the poster's thread, when nothing waits before it; one that
// must wait (RNR, no answer from a target gone quiet) is deferred, and the
// WQEs behind it with it, so that the send queue executes in order (IBA
// 9.5). Deferred work is retried by the service thread (core/service.h)
// and by the application's empty CQ polls (core::Cq::poll).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <vector>

#include "common/adaptive_lock.h"
#include "contract/shm_layout.h"
#include "core/context.h"
#include "core/qp_state.h"
#include "memory/peer_map.h"
#include "net/link_engine.h"
#include "transport/timers.h"

namespace uroce::core {

class ShmEngine final : public LinkEngine {
 public:
  /// The engine of QP `qpn` of `type`, whose attributes are `attr` and
  /// shared state `shm`; `lock` is the QP's send lock, which the caller
  /// holds around every call (asserted) but progress(), which takes it.
  ShmEngine(Context* ctx, QpOwner& owner, AdaptiveLock& lock, const QpModifyArgs& attr, QpType type,
            uint32_t qpn, const QpShm* shm)
      : ctx_(ctx), owner_(owner), lock_(lock), attr_(attr), type_(type), qpn_(qpn), shm_(shm) {}
  ShmEngine(const ShmEngine&) = delete;
  ShmEngine& operator=(const ShmEngine&) = delete;

  void post(const SendWqe& w) override;
  void flush() override;
  void drain(bool on) override;

  /// Retries deferred work (RNR, no answer); true while work is still
  /// deferred. Takes the QP's send lock.
  bool progress() EXCLUDES(lock_);
  /// True while deferred work waits for the service thread (read by Service).
  bool wants_service() const { return wants_service_.load(std::memory_order_acquire); }
  /// ibv_modify_qp to RESET: deferred work is dropped silently, the cached
  /// peer forgotten.
  void reset();
  /// The destination QPN changed (ibv_modify_qp): the cached peer is stale.
  void forget_peer() {
    lock_.assert_held();
    peer_ = PeerQp{};
  }

 private:
  struct Deferred {
    SendWqe w;
    std::vector<Sge> sge;
    std::vector<uint8_t> data;  // inline payload copy
    uint64_t next_try_ns = 0;
    transport::RetryBudget retries{transport::RetryRule::kAckTimeout};
    transport::RetryBudget rnr_retries{transport::RetryRule::kRnr};
    bool rnr = false;
    uint64_t rq_tail_seen = 0;
  };
  enum class Exec { kDone, kRnr, kNoResponse };
  struct ExecOut {
    WcStatus status = WcStatus::kSuccess;
    uint32_t byte_len = 0;
    uint32_t rnr_timer = 0;
    uint64_t rq_tail = 0;
  };

  QpState state() const { return QpState(shm_->state.load(std::memory_order_acquire)); }
  Exec execute(const SendWqe& w, ExecOut* out) REQUIRES(lock_);
  void complete(const SendWqe& w, WcStatus st, uint32_t byte_len) REQUIRES(lock_);
  /// `w` completed with error `st`: the rest of the queue is flushed and
  /// the QP hears of the failure.
  void fail(const SendWqe& w, WcStatus st) REQUIRES(lock_);
  /// fail() for the deferred WQE at the front.
  void fail_front(WcStatus st) REQUIRES(lock_);
  void defer(const SendWqe& w, Exec why, const ExecOut& o) REQUIRES(lock_);
  bool progress_locked() REQUIRES(lock_);
  /// The target QP `qpn`: the cached peer_ (RC/UC) or, for UD, resolved into *tmp.
  /// nullptr if it cannot be resolved.
  const PeerQp* peer_for(uint32_t qpn, PeerQp* tmp) REQUIRES(lock_);
  /// An RDMA WRITE of one gather element on a connected QP whose peer is on
  /// this host, into the target region last written (core/shm_engine_write.cc):
  /// executes and completes `w` and returns true; false when anything is
  /// not as cached (nothing done: the general path runs).
  bool write_direct(const SendWqe& w) REQUIRES(lock_);
  /// Caches the peer's region `rkey` names (validated as respond_write
  /// validates it) with its address in this process; false if it cannot be.
  bool write_target_fill(uint32_t rkey, uint64_t raddr, uint64_t len) REQUIRES(lock_);

  Context* const ctx_;
  QpOwner& owner_;
  AdaptiveLock& lock_;
  const QpModifyArgs& attr_;
  const QpType type_;
  const uint32_t qpn_;
  const QpShm* const shm_;
  // Everything below under lock_.
  std::deque<Deferred> deferred_ GUARDED_BY(lock_);
  uint32_t unsignaled_ GUARDED_BY(lock_) = 0;  // WQEs completed unsignaled since the last completion
  std::atomic<bool> wants_service_{false};
  PeerQp peer_ GUARDED_BY(lock_){};     // RC/UC: cached target
  PeerQp ud_peer_ GUARDED_BY(lock_){};  // UD: the current WQE's target
  // write_direct's target: the peer region last written, good while its
  // MR-table slot keeps seqlock word `seq`, the peer QP is the one it was
  // validated for and peer_pages retired no mapping.
  struct WriteTarget {
    const MrEntry* e = nullptr;
    uint32_t seq = 1;  // odd: matches no stable slot
    uint32_t rkey = 0;
    uint64_t iova = 0, length = 0;
    uint8_t* here = nullptr;  // this process's address of iova
    uint64_t pages_gen = 0;
    const QpShm* qp = nullptr;  // the target QP validated (with qpn: the same QP still)
    uint32_t qpn = 0;
  } wt_ GUARDED_BY(lock_);
};

}  // namespace uroce::core
