/* Cross-core cache-line round trip: the floor of any cross-core notification.
 *   cacheline_rtt CPU_A CPU_B ROUND_TRIPS
 * Thread A (CPU_A) stores an odd value into one cache line, thread B (CPU_B)
 * waits for it and answers with the next even value; both spin with PAUSE.
 * Timed in batches of 1000 round trips; the median batch is robust to the
 * preemptions of a 2-core machine. Prints
 *   RESULT cacheline rtt_ns=.. (median) rtt_min_ns=.. oneway_ns=.. round_trips=.. */
#include "bench_util.h"

#include <pthread.h>
#include <stdatomic.h>

enum { kBatch = 1000 };
static _Alignas(64) _Atomic uint64_t g_line;
static long g_total;
static int g_cpu_b;

static void* responder(void* unused) {
  (void)unused;
  bu_pin(g_cpu_b);
  for (long i = 0; i < g_total; ++i) {
    uint64_t want = 2 * (uint64_t)i + 1;
    while (atomic_load_explicit(&g_line, memory_order_acquire) != want) bu_relax();
    atomic_store_explicit(&g_line, want + 1, memory_order_release);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s CPU_A CPU_B ROUND_TRIPS\n", argv[0]);
    return 2;
  }
  int cpu_a = atoi(argv[1]);
  g_cpu_b = atoi(argv[2]);
  long batches = atol(argv[3]) / kBatch;
  if (batches < 10) batches = 10;
  long warm = batches / 10 + 1;
  g_total = (batches + warm) * kBatch;
  double* per_rt = calloc((size_t)batches, sizeof(double));
  bu_pin(cpu_a);
  pthread_t th;
  if (pthread_create(&th, NULL, responder, NULL) != 0) bu_die("pthread_create");
  long i = 0;
  for (long b = -warm; b < batches; ++b) {
    uint64_t t0 = bu_now_ns();
    for (int k = 0; k < kBatch; ++k, ++i) {
      uint64_t v = 2 * (uint64_t)i + 1;
      atomic_store_explicit(&g_line, v, memory_order_release);
      while (atomic_load_explicit(&g_line, memory_order_acquire) != v + 1) bu_relax();
    }
    if (b >= 0) per_rt[b] = (double)(bu_now_ns() - t0) / kBatch;
  }
  pthread_join(th, NULL);
  double med = bu_median(per_rt, (size_t)batches);
  printf("RESULT cacheline rtt_ns=%.1f rtt_min_ns=%.1f oneway_ns=%.1f round_trips=%ld cpus=%d,%d\n", med,
         per_rt[0], med / 2, batches * kBatch, cpu_a, g_cpu_b);
  return 0;
}
