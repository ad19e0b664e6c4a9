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

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void full(int fd, char* buf, size_t len, int sending) {
  size_t done = 0;
  while (done < len) {
    ssize_t r =
        sending ? send(fd, buf + done, len - done, MSG_NOSIGNAL) : recv(fd, buf + done, len - done, 0);
    if (r <= 0) bu_die(sending ? "send" : "recv");
    done += (size_t)r;
  }
}

static int cmp_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  const char* addr = NULL;
  int port = 0, server = 0;
  size_t size = 64;
  long n = 10000;
  double seconds = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "-l") && i + 1 < argc) {
      server = 1;
      port = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "-c") && i + 2 < argc) {
      addr = argv[++i];
      port = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "-s") && i + 1 < argc) {
      size = bu_parse_size(argv[++i]);
    } else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
      n = atol(argv[++i]);
    } else if (!strcmp(argv[i], "-t") && i + 1 < argc) {
      seconds = atof(argv[++i]);
    } else {
      fprintf(stderr, "usage: %s -l PORT [-s SIZE] | -c ADDR PORT [-s SIZE] [-n N] [-t SECONDS]\n", argv[0]);
      return 2;
    }
  }
  if (!port || size == 0 || n <= 0) return 2;
  char* buf = bu_alloc_touched(size, 1);
  int one = 1;
  int fd;
  if (server) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (bind(l, (struct sockaddr*)&sa, sizeof(sa)) || listen(l, 1)) bu_die("bind/listen");
    fd = accept(l, NULL, NULL);
    if (fd < 0) bu_die("accept");
    close(l);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    for (;;) {
      size_t done = 0;
      while (done < size) {
        ssize_t r = recv(fd, buf + done, size - done, 0);
        if (r <= 0) return 0;  // the client is done
        done += (size_t)r;
      }
      full(fd, buf, size, 1);
    }
  }
  fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) bu_die("address");
  int tries = 0;
  while (connect(fd, (struct sockaddr*)&sa, sizeof(sa)) != 0) {
    if (++tries > 100) bu_die("connect");
    close(fd);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    usleep(50000);
  }
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  uint64_t* t = malloc((size_t)n * sizeof(uint64_t));
  if (!t) bu_die("malloc");
  const uint64_t end = seconds > 0 ? bu_now_ns() + (uint64_t)(seconds * 1e9) : UINT64_MAX;
  long i = 0;
  for (; i < n && bu_now_ns() < end; ++i) {
    const uint64_t t0 = bu_now_ns();
    full(fd, buf, size, 1);
    full(fd, buf, size, 0);
    t[i] = bu_now_ns() - t0;
  }
  n = i;
  if (n == 0) return 1;
  qsort(t, (size_t)n, sizeof(uint64_t), cmp_u64);
  printf("%zu %ld %.2f %.2f\n", size, n, t[n / 2] / 2e3, t[(n * 99) / 100] / 2e3);
  return 0;
}
