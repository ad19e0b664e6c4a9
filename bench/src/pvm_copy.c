/* Cost of one process_vm_writev / process_vm_readv call: what uroce's
 * intra-host link pays per one-sided operation (its single copy).
 *   pvm_copy CPU MS_PER_SIZE SIZE...
 * A forked child owns a buffer (touched, so no page faults are timed) and
 * sleeps; the parent (pinned to CPU) copies SIZE bytes into it with
 * process_vm_writev, then out of it with process_vm_readv, for about
 * MS_PER_SIZE ms each, in timed batches. Per op and SIZE prints
 *   RESULT pvm op=writev|readv size=.. us=.. (median per call) us_min=.. gbyte_s=.. (from median) calls=.. */
#include "bench_util.h"

#include <signal.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

enum { kMaxBatches = 4096 };

static ssize_t one_call(int write, pid_t pid, char* local, char* remote, size_t size) {
  struct iovec l = {local, size}, r = {remote, size};
  return write ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s CPU MS_PER_SIZE SIZE...\n", argv[0]);
    return 2;
  }
  double budget_ns = atof(argv[2]) * 1e6;
  size_t max = 0;
  for (int i = 3; i < argc; ++i)
    if (bu_parse_size(argv[i]) > max) max = bu_parse_size(argv[i]);
  char* local = bu_alloc_touched(max, 1);
  int pfd[2];
  if (pipe(pfd) != 0) bu_die("pipe");
  pid_t child = fork();
  if (child < 0) bu_die("fork");
  if (child == 0) {
    char* remote = bu_alloc_touched(max, 0);
    if (write(pfd[1], &remote, sizeof(remote)) != sizeof(remote)) _exit(1);
    for (;;) pause(); /* killed by the parent */
  }
  char* remote = NULL;
  if (read(pfd[0], &remote, sizeof(remote)) != sizeof(remote)) bu_die("read child address");
  bu_pin(atoi(argv[1]));
  static double per_call[kMaxBatches];
  int rc = 0;
  for (int op = 1; op >= 0 && rc == 0; --op) {
    for (int a = 3; a < argc; ++a) {
      size_t size = bu_parse_size(argv[a]);
      uint64_t t = bu_now_ns();
      for (long warm = 0; bu_now_ns() - t < 2000000 || warm < 3; ++warm)
        if (one_call(op, child, local, remote, size) != (ssize_t)size) bu_die("process_vm_*");
      /* Batch of ~50 us, sized from the median of 9 single calls. */
      double one_ns[9];
      for (int c = 0; c < 9; ++c) {
        uint64_t c0 = bu_now_ns();
        one_call(op, child, local, remote, size);
        one_ns[c] = (double)(bu_now_ns() - c0);
      }
      long batch = (long)(50000.0 / bu_median(one_ns, 9)) + 1;
      size_t nb = 0;
      long calls = 0;
      uint64_t start = bu_now_ns(), now = start;
      while (nb < kMaxBatches && (now - start < budget_ns || nb < 5)) {
        uint64_t b0 = bu_now_ns();
        for (long i = 0; i < batch; ++i) one_call(op, child, local, remote, size);
        now = bu_now_ns();
        per_call[nb++] = (double)(now - b0) / batch;
        calls += batch;
      }
      double med = bu_median(per_call, nb);
      printf("RESULT pvm op=%s size=%zu us=%.4f us_min=%.4f gbyte_s=%.3f calls=%ld\n", op ? "writev" : "readv",
             size, med / 1e3, per_call[0] / 1e3, (double)size / med, calls);
      fflush(stdout);
    }
  }
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  return rc;
}
