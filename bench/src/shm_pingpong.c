/* Cross-process shared-memory ping-pong: the floor of a message between two
 * processes that both busy-poll (what an intra-host RDMA SEND competes with).
 *   shm_pingpong CPU_A CPU_B MS_PER_SIZE SIZE...      (SIZE <= 1 MiB)
 * Parent (CPU_A) and forked child (CPU_B) share one MAP_SHARED region with
 * two mailboxes (ping, pong). A mailbox is a cache line holding a sequence
 * number and a length, followed by the payload. The sender copies its
 * payload in and publishes the sequence number (release); the receiver spins
 * on it (acquire) and copies the payload out; the child answers with the same
 * size. So one message = two copies (in and out) and one cache-line handoff.
 * Timed in batches; per SIZE prints
 *   RESULT shm_pingpong size=.. rtt_ns=.. (median batch) rtt_min_ns=.. oneway_ns=.. round_trips=.. */
#include "bench_util.h"

#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

enum { kMaxPayload = 1 << 20, kMaxBatches = 4096 };
static const uint32_t kStop = UINT32_MAX;

struct Mailbox {
  _Alignas(64) _Atomic uint64_t seq;
  uint32_t len;
  _Alignas(64) char data[kMaxPayload];
};
struct Region {
  struct Mailbox ping, pong;
};

static void send_msg(struct Mailbox* m, uint64_t seq, const char* src, uint32_t len) {
  if (len != kStop) memcpy(m->data, src, len);
  m->len = len;
  atomic_store_explicit(&m->seq, seq, memory_order_release);
}

static uint32_t recv_msg(struct Mailbox* m, uint64_t seq, char* dst) {
  while (atomic_load_explicit(&m->seq, memory_order_acquire) != seq) bu_relax();
  uint32_t len = m->len;
  if (len != kStop) memcpy(dst, m->data, len);
  return len;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s CPU_A CPU_B MS_PER_SIZE SIZE...\n", argv[0]);
    return 2;
  }
  int cpu_a = atoi(argv[1]), cpu_b = atoi(argv[2]);
  double budget_ns = atof(argv[3]) * 1e6;
  struct Region* r =
      mmap(NULL, sizeof(struct Region), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (r == MAP_FAILED) bu_die("mmap");
  memset(r, 0, sizeof(*r));
  char* local = bu_alloc_touched(kMaxPayload, 0x5a);
  pid_t child = fork();
  if (child < 0) bu_die("fork");
  if (child == 0) {
    bu_pin(cpu_b);
    for (uint64_t seq = 1;; ++seq) {
      uint32_t len = recv_msg(&r->ping, seq, local);
      send_msg(&r->pong, seq, local, len);
      if (len == kStop) _exit(0);
    }
  }
  bu_pin(cpu_a);
  static double per_rt[kMaxBatches];
  uint64_t seq = 0;
  for (int a = 4; a < argc; ++a) {
    size_t size = bu_parse_size(argv[a]);
    if (size > kMaxPayload) size = kMaxPayload;
    uint32_t len = (uint32_t)size;
    /* Warm-up (the first one also waits for the child to start), then size a
     * batch to ~50 us from the median of 15 short chunks: a single timing
     * can include a preemption on this 2-core machine. */
    uint64_t t0 = bu_now_ns();
    for (long warm = 0; bu_now_ns() - t0 < 5000000 || warm < 10; ++warm) {
      ++seq;
      send_msg(&r->ping, seq, local, len);
      recv_msg(&r->pong, seq, local);
    }
    double chunk_ns[15];
    for (int c = 0; c < 15; ++c) {
      uint64_t c0 = bu_now_ns();
      for (int i = 0; i < 32; ++i) {
        ++seq;
        send_msg(&r->ping, seq, local, len);
        recv_msg(&r->pong, seq, local);
      }
      chunk_ns[c] = (double)(bu_now_ns() - c0) / 32;
    }
    long batch = (long)(50000.0 / bu_median(chunk_ns, 15)) + 1;
    size_t nb = 0;
    uint64_t start = bu_now_ns(), now = start;
    while (nb < kMaxBatches && (now - start < budget_ns || nb < 5)) {
      uint64_t b0 = bu_now_ns();
      for (long i = 0; i < batch; ++i) {
        ++seq;
        send_msg(&r->ping, seq, local, len);
        recv_msg(&r->pong, seq, local);
      }
      now = bu_now_ns();
      per_rt[nb++] = (double)(now - b0) / batch;
    }
    double med = bu_median(per_rt, nb);
    printf("RESULT shm_pingpong size=%zu rtt_ns=%.1f rtt_min_ns=%.1f oneway_ns=%.1f round_trips=%ld\n", size,
           med, per_rt[0], med / 2, (long)nb * batch);
    fflush(stdout);
  }
  ++seq;
  send_msg(&r->ping, seq, local, kStop);
  recv_msg(&r->pong, seq, local);
  int st;
  waitpid(child, &st, 0);
  return 0;
}
