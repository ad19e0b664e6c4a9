#include "common/adaptive_lock.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

#include "common/clock.h"

namespace uroce {

namespace {
std::atomic<uint64_t> g_sleeps{0};
long futex(std::atomic<int>* addr, int op, int val) {
  static_assert(sizeof(std::atomic<int>) == sizeof(int));
  return syscall(SYS_futex, reinterpret_cast<int*>(addr), op | FUTEX_PRIVATE_FLAG, val, nullptr, nullptr, 0);
}
}  // namespace

uint64_t AdaptiveLock::sleeps() { return g_sleeps.load(std::memory_order_relaxed); }

void AdaptiveLock::lock_slow() {
  // Spin: a holder on another core is done within a few hundred cycles.
  for (int i = 0; i < 128; ++i) {
    cpu_relax();
    if (try_lock()) return;
  }
  // Yield: a holder preempted on this core runs now (bounded by kYieldNs,
  // past which the holder is likely in a long system call elsewhere).
  const uint64_t until = fast_now_ns() + kYieldNs;
  do {
    sched_yield();
    if (try_lock()) return;
  } while (fast_now_ns() < until);
  // Sleep (Drepper's "Futexes Are Tricky", mutex 3): mark the lock contended;
  // whoever releases it then wakes one sleeper.
  g_sleeps.fetch_add(1, std::memory_order_relaxed);
  while (state_.exchange(2, std::memory_order_acquire) != 0) futex(&state_, FUTEX_WAIT, 2);
}

void AdaptiveLock::wake_one() { futex(&state_, FUTEX_WAKE, 1); }

}  // namespace uroce
