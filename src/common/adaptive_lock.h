// A process-local mutex for what both an application thread and the
// network engine thread take (NetQp's state): system calls run under it (the
// sends of a call), so a waiter must not spin for long; but a waiter that
// sleeps at once makes each release a futex wake, and the woken thread often
// shares its core with the releaser (docs/network-link.md, "The engine and
// the application", has what std::mutex cost there). So a waiter spins
// briefly (a holder on another core), then yields (a holder preempted on this
// core runs and releases), and sleeps on a futex only after kYieldNs of
// that. The release is one exchange, plus a futex wake only when someone
// sleeps. Satisfies Lockable (std::lock_guard, std::unique_lock work).
#pragma once

#include <atomic>
#include <cassert>
#include <cstdint>

#include "common/thread_annotations.h"

namespace uroce {

class CAPABILITY("mutex") AdaptiveLock {
 public:
  void lock() ACQUIRE() {
    int expected = 0;
    if (!state_.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed))
      lock_slow();
  }
  bool try_lock() TRY_ACQUIRE(true) {
    int expected = 0;
    return state_.load(std::memory_order_relaxed) == 0 &&
           state_.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed);
  }
  void unlock() RELEASE() {
    if (state_.exchange(0, std::memory_order_release) == 2) wake_one();
  }

  /// Tells the thread-safety analysis that the caller holds the lock (a
  /// function whose caller takes it); checked in debug builds.
  void assert_held() const ASSERT_CAPABILITY(this) { assert(state_.load(std::memory_order_relaxed) != 0); }

  /// How long a waiter yields before it sleeps.
  static constexpr uint64_t kYieldNs = 50'000;
  /// Waiters that went to sleep so far, process-wide (for tests).
  static uint64_t sleeps();

 private:
  void lock_slow();
  void wake_one();
  // 0: free; 1: held; 2: held, and a waiter may sleep (the release wakes one).
  std::atomic<int> state_{0};
};

}  // namespace uroce
