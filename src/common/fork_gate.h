// Keeps one of the library's background threads (the service thread, the
// network engine) out of malloc and out of the library's locks at the
// instant of a fork(). The thread does all its work under a mutex, which a
// pthread_atfork prepare handler takes; the parent handler releases it.
// glibc's malloc survives a fork in the middle of an allocation, but other
// allocators do not (ASan's: the child's first new thread then blocks for
// good on a lock copied held), and neither would this library's own state.
// A thread that was just created runs its start-up allocations before it
// can take the mutex: prepare waits (bounded) until it has.
#pragma once

#include <unistd.h>

#include <atomic>
#include <mutex>

namespace uroce {

class ForkGate {
 public:
  /// Before the thread is created.
  void starting() { state_.store(kStarting, std::memory_order_release); }
  /// The thread, first thing, holding `mu`: its start-up is over.
  void running() { state_.store(kRunning, std::memory_order_release); }
  /// pthread_atfork prepare: waits for a starting thread (≤ 1 s), then takes `mu`.
  void prepare(std::mutex& mu) {
    for (int i = 0; i < 10000 && state_.load(std::memory_order_acquire) == kStarting; ++i) usleep(100);
    mu.lock();
  }
  /// pthread_atfork child: the thread does not exist there.
  void child() { state_.store(kNone, std::memory_order_relaxed); }

 private:
  static constexpr int kNone = 0, kStarting = 1, kRunning = 2;
  std::atomic<int> state_{kNone};
};

}  // namespace uroce
