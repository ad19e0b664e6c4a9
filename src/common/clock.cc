#include "common/clock.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

namespace uroce::detail {

namespace {

/// Whether Linux keeps time with the TSC here (then it is invariant and
/// synchronized across CPUs, or the kernel would have picked another).
bool kernel_uses_tsc() {
  const int fd =
      open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char b[16] = {};
  const ssize_t n = read(fd, b, sizeof(b) - 1);
  close(fd);
  return n >= 3 && strncmp(b, "tsc", 3) == 0 && (n == 3 || b[3] == '\n');
}

TscScale calibrate() {
  TscScale s;
  if (!kernel_uses_tsc()) return s;
  const uint64_t t0 = __builtin_ia32_rdtsc(), n0 = now_ns();
  uint64_t t1, n1;
  do {
    t1 = __builtin_ia32_rdtsc();
    n1 = now_ns();
  } while (n1 - n0 < 100'000);  // bounded: CLOCK_MONOTONIC advances
  if (t1 <= t0) return s;
  // Anchored at the start: reads up to the calibration's length behind it
  // (another CPU's TSC lagging a little) still map to later times.
  s.tsc0 = t0;
  s.ns0 = n0;
  s.mult = uint64_t(((unsigned __int128)(n1 - n0) << 32) / (t1 - t0));
  return s;
}

}  // namespace

const TscScale& tsc_scale() {
  static const TscScale s = calibrate();
  return s;
}

}  // namespace uroce::detail
