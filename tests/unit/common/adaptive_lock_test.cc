// common/adaptive_lock.h: mutual exclusion, and a waiter for a long hold
// sleeps on the futex instead of spinning or yielding through it.
#include "common/adaptive_lock.h"

#include <gtest/gtest.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace uroce {
namespace {

double thread_cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

TEST(AdaptiveLock, ExcludesEachOther) {
  AdaptiveLock mu;
  uint64_t counter = 0;  // plain: only the lock keeps the increments whole
  constexpr int kEach = 200'000;
  auto work = [&] {
    for (int i = 0; i < kEach; ++i) {
      std::lock_guard<AdaptiveLock> g(mu);
      ++counter;
    }
  };
  std::thread a(work), b(work), c(work);
  a.join();
  b.join();
  c.join();
  EXPECT_EQ(counter, 3u * kEach);
  // Expect: free again, and try_lock fails while held.
  ASSERT_TRUE(mu.try_lock());
  EXPECT_FALSE(mu.try_lock());
  mu.unlock();
}

TEST(AdaptiveLock, AWaiterForALongHoldSleeps) {
  AdaptiveLock mu;
  mu.lock();
  const uint64_t sleeps_before = AdaptiveLock::sleeps();
  std::atomic<bool> got{false};
  double waiter_cpu_ms = 0;
  std::thread waiter([&] {
    const double c0 = thread_cpu_ms();
    mu.lock();
    waiter_cpu_ms = thread_cpu_ms() - c0;
    got.store(true);
    mu.unlock();
  });
  // The holder keeps it 300 ms (a system call that long under the lock).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(got.load());
  mu.unlock();
  waiter.join();
  EXPECT_TRUE(got.load());
  // Expect: the waiter went to sleep, having spent CPU for its spin and
  // yield phases only (kYieldNs of yielding, not 300 ms).
  EXPECT_EQ(AdaptiveLock::sleeps(), sleeps_before + 1);
  EXPECT_LT(waiter_cpu_ms, 100.0);
}

}  // namespace
}  // namespace uroce
