// Monotonic time helpers used by timers and bounded waits.
#pragma once

#include <time.h>

#include <cstdint>

namespace uroce {

/// Monotonic nanoseconds (CLOCK_MONOTONIC; vDSO, no syscall).
inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

namespace detail {
struct TscScale {
  uint64_t tsc0 = 0, ns0 = 0;
  uint64_t mult = 0;  // ns per tick, 32.32 fixed point; 0: no usable TSC
};
const TscScale& tsc_scale();
/// The scale between a tick counter `tsc` and CLOCK_MONOTONIC `ns` (tests
/// pass clocks of their own): each end of the measurement reads `tsc`
/// between two reads of `ns` at most kMaxBracketNs apart, so a preemption or
/// interrupt between the reads cannot skew the rate; mult 0 if no such pair
/// comes within a bounded number of tries.
TscScale calibrate(uint64_t (*tsc)(), uint64_t (*ns)());
/// Calibration: an end's two `ns` reads at most this far apart, the
/// measurement at least kCalibrateNs long: the rate is off by 1 % at most
/// (by ~0.04 % with the ~40 ns a pair of reads takes on this VM).
constexpr uint64_t kMaxBracketNs = 1'000;
constexpr uint64_t kCalibrateNs = 100'000;
}  // namespace detail

/// A cheaper monotonic clock for the network engine's paths, several reads
/// per packet: the TSC scaled to nanoseconds (~10 ns a read here against
/// ~25 for clock_gettime in a VM) where the kernel keeps time with it
/// (clocksource "tsc": constant rate, the same on every CPU), else now_ns().
/// Calibrated once against CLOCK_MONOTONIC over ~100 us (detail::calibrate),
/// so its rate is off by ~0.05 %, 1 % at most: its values are for comparing
/// with each other, in one process, never with now_ns() or another process's.
inline uint64_t fast_now_ns() {
  const detail::TscScale& s = detail::tsc_scale();
  if (!s.mult) return now_ns();
  // Signed: a CPU whose TSC lags the calibrating one a little must not wrap.
  const int64_t d = int64_t(__builtin_ia32_rdtsc() - s.tsc0);
  return s.ns0 + (d > 0 ? uint64_t((unsigned __int128)uint64_t(d) * s.mult >> 32) : 0);
}

/// Spin-wait hint for busy loops.
inline void cpu_relax() { __builtin_ia32_pause(); }

}  // namespace uroce
