/* Include this header first (it defines _GNU_SOURCE).
 * Helpers shared by uroce's limit micro-benchmarks (bench/src).
 * Every program prints one "RESULT key=value ..." line per measurement, which
 * bench/harness.py parses. Times are CLOCK_MONOTONIC; sizes are bytes. */
#ifndef UROCE_BENCH_UTIL_H
#define UROCE_BENCH_UTIL_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline uint64_t bu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void bu_die(const char* what) {
  fprintf(stderr, "%s: %s\n", what, strerror(errno));
  exit(1);
}

/* Pins the calling thread; cpu < 0 leaves it alone. */
static inline void bu_pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) bu_die("sched_setaffinity");
}

/* The spin-wait hint: PAUSE on x86 keeps a spinning sibling from starving. */
static inline void bu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static int bu_cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* Median of n samples (sorts them in place). */
static inline double bu_median(double* v, size_t n) {
  if (n == 0) return 0;
  qsort(v, n, sizeof(*v), bu_cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Parses "4096", "64K", "1M" (binary units). */
static inline size_t bu_parse_size(const char* s) {
  char* end = NULL;
  unsigned long long v = strtoull(s, &end, 0);
  if (end && (*end == 'k' || *end == 'K')) v <<= 10;
  if (end && (*end == 'm' || *end == 'M')) v <<= 20;
  return (size_t)v;
}

/* Page-aligned buffer, written once so no page fault lands inside a timing. */
static inline char* bu_alloc_touched(size_t size, int fill) {
  size_t sz = (size + 4095) & ~(size_t)4095;
  char* p = aligned_alloc(4096, sz ? sz : 4096);
  if (!p) bu_die("aligned_alloc");
  memset(p, fill, sz ? sz : 4096);
  return p;
}
#endif
