#include "common/clock.h"

#include <fcntl.h>
#include <pthread.h>
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

uint64_t read_tsc() { return __builtin_ia32_rdtsc(); }

/// One end of the measurement: a `tsc` reading and the `ns` time it was
/// taken at, the midpoint of the two `ns` reads around it (the closest pair
/// of a few tries). False if none was within kMaxBracketNs: the thread kept
/// losing its CPU between the reads.
bool reading(uint64_t (*tsc)(), uint64_t (*ns)(), uint64_t* t, uint64_t* n) {
  constexpr int kTries = 64;
  constexpr uint64_t kCloseNs = 200;  // good enough: stop trying
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < kTries && best > kCloseNs; ++i) {
    // Each declarator's initializer is sequenced before the next.
    const uint64_t a = ns(), x = tsc(), b = ns();
    if (b >= a && b - a < best) {
      best = b - a;
      *t = x;
      *n = a + (b - a) / 2;
    }
  }
  return best <= kMaxBracketNs;
}

}  // namespace

TscScale calibrate(uint64_t (*tsc)(), uint64_t (*ns)()) {
  TscScale s;
  // A preemption between the reads of either end is ignored; one in the
  // middle delays both clocks alike.
  uint64_t t0, n0, t1, n1;
  if (!reading(tsc, ns, &t0, &n0)) return s;
  while (ns() - n0 < kCalibrateNs) {  // bounded: CLOCK_MONOTONIC advances
  }
  if (!reading(tsc, ns, &t1, &n1) || t1 <= t0 || n1 <= n0) return s;
  // Anchored at the start: reads up to the calibration's length behind it
  // (another CPU's TSC lagging a little) still map to later times.
  s.tsc0 = t0;
  s.ns0 = n0;
  s.mult = uint64_t(((unsigned __int128)(n1 - n0) << 32) / (t1 - t0));
  return s;
}

const TscScale& tsc_scale() {
  static const TscScale s = kernel_uses_tsc() ? calibrate(read_tsc, now_ns) : TscScale{};
  return s;
}

namespace {
// The calibration takes ~100 us under the initialization guard of `s`: a
// fork() by another thread meanwhile left the child's copy of that guard
// forever "in progress", and the child's first fast_now_ns() waited on it
// for good (verbs_ops_srq_udp_test's second agent, forked while the test
// process's network thread calibrated). Every fork() first finishes (or
// makes) the calibration in the forking thread.
__attribute__((constructor)) void calibrate_before_any_fork() {
  pthread_atfork([] { (void)tsc_scale(); }, nullptr, nullptr);
}
}  // namespace

}  // namespace uroce::detail
