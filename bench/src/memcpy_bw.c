/* Single-core memcpy bandwidth: the ceiling of any one-copy data path.
 *   memcpy_bw CPU MS_PER_SIZE SIZE...
 * For each SIZE, copies one buffer into another with glibc memcpy (both
 * touched first) for about MS_PER_SIZE ms, in timed batches, and prints
 *   RESULT memcpy size=.. gbyte_s=.. (median batch) gbyte_s_avg=.. copies=..
 * GB/s counts bytes copied (1e9 B/s); memory traffic is twice that. */
#include "bench_util.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s CPU MS_PER_SIZE SIZE...\n", argv[0]);
    return 2;
  }
  bu_pin(atoi(argv[1]));
  double budget_ns = atof(argv[2]) * 1e6;
  size_t max = 0;
  for (int i = 3; i < argc; ++i)
    if (bu_parse_size(argv[i]) > max) max = bu_parse_size(argv[i]);
  char* src = bu_alloc_touched(max, 1);
  char* dst = bu_alloc_touched(max, 2);
  /* Through a volatile pointer so the compiler cannot drop or merge copies. */
  void* (*volatile copy)(void*, const void*, size_t) = memcpy;
  enum { kMaxBatches = 4096 };
  static double per_copy_ns[kMaxBatches];
  for (int a = 3; a < argc; ++a) {
    size_t size = bu_parse_size(argv[a]);
    /* Warm-up, then a batch of ~100 us (clock reads cost nothing), sized from
     * the median of 9 single copies. */
    uint64_t t = bu_now_ns();
    for (long warm = 0; bu_now_ns() - t < 2000000 || warm < 2; ++warm) copy(dst, src, size);
    double one_ns[9];
    for (int c = 0; c < 9; ++c) {
      uint64_t c0 = bu_now_ns();
      copy(dst, src, size);
      one_ns[c] = (double)(bu_now_ns() - c0);
    }
    long batch = (long)(100000.0 / bu_median(one_ns, 9)) + 1;
    size_t nb = 0;
    long copies = 0;
    uint64_t start = bu_now_ns(), now = start;
    while (nb < kMaxBatches && (now - start < budget_ns || nb < 5)) {
      uint64_t b0 = bu_now_ns();
      for (long i = 0; i < batch; ++i) {
        copy(dst, src, size);
        __asm__ volatile("" ::: "memory");
      }
      now = bu_now_ns();
      per_copy_ns[nb++] = (double)(now - b0) / batch;
      copies += batch;
    }
    double avg = (double)size * copies / (double)(now - start);
    double med = (double)size / bu_median(per_copy_ns, nb);
    printf("RESULT memcpy size=%zu gbyte_s=%.3f gbyte_s_avg=%.3f copies=%ld check=%d\n", size, med, avg,
           copies, dst[size / 2]);
    fflush(stdout);
  }
  return 0;
}
