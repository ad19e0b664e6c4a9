/* The floor under one connection set-up on this machine: a message to a
 * process asleep on the other CPU and its answer (two wake-ups), after the
 * machine was idle for a while, as one connection alone finds it. Any CM
 * exchange moves at least a request to the listening process and an answer
 * back; uroce's also goes through uroced (four wake-ups).
 *   wake_rtt SERVER_CPU CLIENT_CPU COUNT IDLE_US
 * prints
 *   RESULT wake_rtt idle_us=.. count=.. median_us=.. min_us=.. p90_us=.. */
#include "bench_util.h"
/* (bench_util.h first: it defines _GNU_SOURCE) */
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int cmp(const void* a, const void* b) {
  const uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: wake_rtt SERVER_CPU CLIENT_CPU COUNT IDLE_US\n");
    return 2;
  }
  const int scpu = atoi(argv[1]), ccpu = atoi(argv[2]), n = atoi(argv[3]), idle = atoi(argv[4]);
  if (n < 1) bu_die("COUNT");
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) bu_die("socketpair");
  const pid_t child = fork();
  if (child < 0) bu_die("fork");
  if (child == 0) {
    close(sv[0]);
    bu_pin(scpu);
    char b[8];
    while (recv(sv[1], b, sizeof(b), 0) > 0)
      if (send(sv[1], b, 1, 0) != 1) break;
    _exit(0);
  }
  close(sv[1]);
  bu_pin(ccpu);
  uint64_t* d = calloc((size_t)n, sizeof(uint64_t));
  if (!d) bu_die("calloc");
  char b[8] = {0};
  for (int i = 0; i < n; ++i) {
    usleep((useconds_t)idle);
    const uint64_t t0 = bu_now_ns();
    if (send(sv[0], b, 1, 0) != 1 || recv(sv[0], b, sizeof(b), 0) != 1) bu_die("round trip");
    d[i] = bu_now_ns() - t0;
  }
  close(sv[0]);
  waitpid(child, NULL, 0);
  qsort(d, (size_t)n, sizeof(uint64_t), cmp);
  printf("RESULT wake_rtt idle_us=%d count=%d median_us=%.2f min_us=%.2f p90_us=%.2f\n", idle, n,
         d[n / 2] / 1e3, d[0] / 1e3, d[(size_t)n * 9 / 10] / 1e3);
  free(d);
  return 0;
}
