// A process-local lock for the verbs fast path (post_send, post_recv,
// poll_cq): one atomic exchange to take, one store to release, where a
// pthread mutex costs ~45 instructions per pair. Critical sections under it
// are short; a waiter spins briefly, then yields, so a preempted holder
// does not burn a core. Satisfies BasicLockable (std::lock_guard works).
#pragma once

#include <sched.h>

#include <atomic>
#include <cassert>

#include "common/clock.h"
#include "common/thread_annotations.h"

namespace uroce {

class CAPABILITY("mutex") SpinLock {
 public:
  void lock() ACQUIRE() {
    while (locked_.exchange(true, std::memory_order_acquire)) {  // pairs with unlock's release
      for (int spins = 0; locked_.load(std::memory_order_relaxed); ++spins) {
        if (spins < 128)
          cpu_relax();
        else
          sched_yield();
      }
    }
  }
  bool try_lock() TRY_ACQUIRE(true) {
    return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() RELEASE() { locked_.store(false, std::memory_order_release); }
  /// Tells the thread-safety analysis that the caller holds the lock (a
  /// function whose caller takes it); checked in debug builds.
  void assert_held() const ASSERT_CAPABILITY(this) { assert(locked_.load(std::memory_order_relaxed)); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace uroce
