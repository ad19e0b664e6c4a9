/* TCP connection set-up on 127.0.0.1, beside the RDMA CM's (cmtime): what a
 * program that opens a socket connection pays instead.
 *   tcp_connect server PORT MAXSEC
 *   tcp_connect client PORT COUNT
 * The server accepts and closes connections until an empty-handed MAXSEC
 * passes. The client measures COUNT connections one after the other
 * (connect() until the server's accept() has taken it: the client waits for
 * the server's close, a read of 0), then COUNT at once (non-blocking
 * connects, then every one waited for), and prints
 *   RESULT tcp_connect mode=serial count=.. us_per_conn=.. min_us=.. max_us=..
 *   RESULT tcp_connect mode=parallel count=.. total_ms=.. us_per_conn=.. */
#include "bench_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

static struct sockaddr_in addr_of(int port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

static int server(int port, int maxsec) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  if (l < 0) bu_die("socket");
  int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in a = addr_of(port);
  if (bind(l, (struct sockaddr*)&a, sizeof(a)) != 0) bu_die("bind");
  if (listen(l, 4096) != 0) bu_die("listen");
  for (;;) {
    struct pollfd p = {l, POLLIN, 0};
    if (poll(&p, 1, maxsec * 1000) <= 0) break;  /* idle that long: done */
    int c = accept(l, NULL, NULL);
    if (c >= 0) close(c);
  }
  close(l);
  return 0;
}

/* Waits until the server closed `s` (it accepted it). */
static void wait_closed(int s) {
  char b;
  struct pollfd p = {s, POLLIN, 0};
  if (poll(&p, 1, 10000) <= 0 || read(s, &b, 1) != 0) {
    fprintf(stderr, "tcp_connect: the server did not take a connection\n");
    exit(1);
  }
}

static int client(int port, int count) {
  struct sockaddr_in a = addr_of(port);
  uint64_t min = UINT64_MAX, max = 0, sum = 0;
  for (int i = 0; i < count; ++i) {
    uint64_t t0 = bu_now_ns();
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) bu_die("socket");
    if (connect(s, (struct sockaddr*)&a, sizeof(a)) != 0) bu_die("connect");
    wait_closed(s);
    uint64_t d = bu_now_ns() - t0;
    close(s);
    sum += d;
    if (d < min) min = d;
    if (d > max) max = d;
  }
  printf("RESULT tcp_connect mode=serial count=%d us_per_conn=%.2f min_us=%.2f max_us=%.2f\n", count,
         sum / 1e3 / count, min / 1e3, max / 1e3);
  int* fds = calloc((size_t)count, sizeof(int));
  if (!fds) bu_die("calloc");
  uint64_t t0 = bu_now_ns();
  for (int i = 0; i < count; ++i) {
    fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fds[i] < 0) bu_die("socket");
    if (connect(fds[i], (struct sockaddr*)&a, sizeof(a)) != 0 && errno != EINPROGRESS) bu_die("connect");
  }
  for (int i = 0; i < count; ++i) {
    int fl = fcntl(fds[i], F_GETFL);
    fcntl(fds[i], F_SETFL, fl & ~O_NONBLOCK);
    wait_closed(fds[i]);
  }
  uint64_t total = bu_now_ns() - t0;
  for (int i = 0; i < count; ++i) close(fds[i]);
  free(fds);
  printf("RESULT tcp_connect mode=parallel count=%d total_ms=%.3f us_per_conn=%.2f\n", count, total / 1e6,
         total / 1e3 / count);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 4 && !strcmp(argv[1], "server")) return server(atoi(argv[2]), atoi(argv[3]));
  if (argc == 4 && !strcmp(argv[1], "client")) return client(atoi(argv[2]), atoi(argv[3]));
  fprintf(stderr, "usage: tcp_connect server PORT MAXSEC | client PORT COUNT\n");
  return 2;
}
