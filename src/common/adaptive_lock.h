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
#include <cstdint>

namespace uroce {

class AdaptiveLock {
 public:
  void lock() {
    int expected = 0;
    if (!state_.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed))
      lock_slow();
  }
  bool try_lock() {
    int expected = 0;
    return state_.load(std::memory_order_relaxed) == 0 &&
           state_.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed);
  }
  void unlock() {
    if (state_.exchange(0, std::memory_order_release) == 2) wake_one();
  }

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
