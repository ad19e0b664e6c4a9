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
}  // namespace detail

/// A cheaper monotonic clock for the network engine's paths, several reads
/// per packet: the TSC scaled to nanoseconds (~10 ns a read here against
/// ~25 for clock_gettime in a VM) where the kernel keeps time with it
/// (clocksource "tsc": constant rate, the same on every CPU), else now_ns().
/// Calibrated once against CLOCK_MONOTONIC over ~100 us, so its rate is off
/// by up to ~0.05 %: its values are for comparing with each other, in one
/// process, never with now_ns() or another process's.
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
