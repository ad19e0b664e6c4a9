// The TSC clock's calibration (common/clock.h): its rate must not depend on
// where the calibrating thread loses its CPU. Fake clocks: a tick counter at
// 2.5 GHz and a nanosecond clock, both reading one made-up true time that
// each read advances by 100 ns, and that jumps once by 15 ms (a preemption,
// or the hypervisor taking the CPU) before a chosen read.
#include "common/clock.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace uroce {
namespace {

uint64_t g_true_ns = 0;     // the made-up true time
uint64_t g_reads = 0;       // reads of either clock so far
uint64_t g_jump_at = 0;     // the read the jump comes before (UINT64_MAX: none)
uint64_t g_jump_ns = 0;     // its length
bool g_jump_every = false;  // before every read instead

constexpr uint64_t kReadNs = 100;
constexpr uint64_t kNsOffset = 5'000'000'000;  // CLOCK_MONOTONIC is not the TSC's zero

void advance() {
  if (g_jump_every || g_reads == g_jump_at) g_true_ns += g_jump_ns;
  ++g_reads;
  g_true_ns += kReadNs;
}
uint64_t fake_tsc() {
  advance();
  return g_true_ns * 5 / 2;
}
uint64_t fake_ns() {
  advance();
  return g_true_ns + kNsOffset;
}

void reset(uint64_t jump_at, uint64_t jump_ns, bool every = false) {
  g_true_ns = 1'000'000;
  g_reads = 0;
  g_jump_at = jump_at;
  g_jump_ns = jump_ns;
  g_jump_every = every;
}

/// What `s` makes of tick count `tsc` (as fast_now_ns does).
uint64_t to_ns(const detail::TscScale& s, uint64_t tsc) {
  return s.ns0 + uint64_t((unsigned __int128)(tsc - s.tsc0) * s.mult >> 32);
}

TEST(TscCalibration, APreemptionAnywhereLeavesTheRateRight) {
  // The reads one calibration makes without a jump.
  reset(UINT64_MAX, 0);
  ASSERT_NE(detail::calibrate(fake_tsc, fake_ns).mult, 0u);
  const uint64_t reads = g_reads;
  ASSERT_GT(reads, detail::kCalibrateNs / kReadNs);
  const double want = 0.4 * 4294967296.0;  // ns per tick, 32.32
  for (uint64_t at = 0; at < reads + 4; ++at) {
    reset(at, 15'000'000);
    const detail::TscScale s = detail::calibrate(fake_tsc, fake_ns);
    // Expect: the rate within 1 % (here exact but for rounding), whichever read the jump came before.
    ASSERT_NE(s.mult, 0u) << "jump before read " << at;
    EXPECT_NEAR(double(s.mult), want, want / 100) << "jump before read " << at;
    // Expect: a tick count read a second later maps to that time, give or
    // take the reads' own 100 ns and 1 % of the second.
    const uint64_t later_true = g_true_ns + 1'000'000'000;
    const double got = double(to_ns(s, later_true * 5 / 2));
    EXPECT_NEAR(got, double(later_true + kNsOffset), 10'000'000.0) << "jump before read " << at;
  }
}

TEST(TscCalibration, AClockNeverReadTwiceCloseTogetherIsNotUsed) {
  // Every read loses the CPU for 2 us: no end of the measurement can be
  // pinned to better than kMaxBracketNs. Expect: no scale (fast_now_ns then
  // reads CLOCK_MONOTONIC itself).
  reset(UINT64_MAX, 2'000, true);
  EXPECT_EQ(detail::calibrate(fake_tsc, fake_ns).mult, 0u);
}

TEST(TscCalibration, TheProcessClockFollowsTheMonotonicClock) {
  // Expect: fast_now_ns never runs backwards against itself.
  uint64_t prev = fast_now_ns();
  for (int i = 0; i < 100000; ++i) {
    const uint64_t t = fast_now_ns();
    ASSERT_GE(t, prev);
    prev = t;
  }
}

}  // namespace
}  // namespace uroce
