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

/// Spin-wait hint for busy loops.
inline void cpu_relax() { __builtin_ia32_pause(); }

}  // namespace uroce
