// A TCP ping-pong (TCP_NODELAY, blocking sockets): the client sends a
// message, the server echoes it, N times; prints the half round trip's p50
// and p99 in microseconds. The TCP peer of bench/incast.py's latency under
// load (uroce's is ib_send_lat), so it sleeps in recv() as a TCP program
// does rather than spinning.
//
// Usage: tcp_pingpong -l PORT [-s SIZE]              (server: one client, then exit)
//        tcp_pingpong -c ADDR PORT [-s SIZE] [-n N] [-t SECONDS]
//                                 (client: N round trips, or fewer in SECONDS)
// Output (client): "size rounds p50_us p99_us" on one line.
#include "bench_util.h"

#include "pingpong_util.h"

int main(int argc, char** argv) {
  struct pp_args a = pp_defaults();
  for (int i = 1; i < argc; ++i) {
    if (!pp_option(argc, argv, &i, &a)) {
      fprintf(stderr, "usage: %s -l PORT [-s SIZE] | -c ADDR PORT [-s SIZE] [-n N] [-t SECONDS]\n", argv[0]);
      return 2;
    }
  }
  if (!pp_valid(&a)) return 2;
  char* buf = bu_alloc_touched(a.size, 1);
  if (a.server) {
    int fd = pp_accept(a.port);
    for (;;) {
      size_t done = 0;
      while (done < a.size) {
        ssize_t r = recv(fd, buf + done, a.size - done, 0);
        if (r <= 0) return 0;  // the client is done
        done += (size_t)r;
      }
      pp_full(fd, buf, a.size, 1);
    }
  }
  int fd = pp_connect(a.addr, a.port);
  uint64_t* t = malloc((size_t)a.n * sizeof(uint64_t));
  if (!t) bu_die("malloc");
  const uint64_t end = pp_end(&a);
  long i = 0;
  for (; i < a.n && bu_now_ns() < end; ++i) {
    const uint64_t t0 = bu_now_ns();
    pp_full(fd, buf, a.size, 1);
    pp_full(fd, buf, a.size, 0);
    t[i] = (bu_now_ns() - t0) / 2;
  }
  return pp_report(a.size, t, i);
}
