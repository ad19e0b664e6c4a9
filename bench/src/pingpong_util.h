/* What the sleeping ping-pongs of bench/incast.py's latency probe share
 * (tcp_pingpong.c, verbs_pingpong.c): their common options, one TCP
 * connection between server and client, and the report. Include after
 * bench_util.h. */
#ifndef UROCE_PINGPONG_UTIL_H
#define UROCE_PINGPONG_UTIL_H
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_util.h"

/* -l PORT (server) | -c ADDR PORT (client), -s SIZE, -n N, -t SECONDS. */
struct pp_args {
  const char* addr;
  int port, server;
  size_t size;
  long n;
  double seconds;
};

static inline struct pp_args pp_defaults(void) {
  struct pp_args a = {NULL, 0, 0, 64, 10000, 0};
  return a;
}

/* Takes the common option at argv[*i] (advancing *i past its values);
 * 0 if argv[*i] is not one. */
static inline int pp_option(int argc, char** argv, int* i, struct pp_args* a) {
  const char* o = argv[*i];
  if (!strcmp(o, "-l") && *i + 1 < argc) {
    a->server = 1;
    a->port = atoi(argv[++*i]);
  } else if (!strcmp(o, "-c") && *i + 2 < argc) {
    a->addr = argv[++*i];
    a->port = atoi(argv[++*i]);
  } else if (!strcmp(o, "-s") && *i + 1 < argc) {
    a->size = bu_parse_size(argv[++*i]);
  } else if (!strcmp(o, "-n") && *i + 1 < argc) {
    a->n = atol(argv[++*i]);
  } else if (!strcmp(o, "-t") && *i + 1 < argc) {
    a->seconds = atof(argv[++*i]);
  } else {
    return 0;
  }
  return 1;
}

static inline int pp_valid(const struct pp_args* a) { return a->port && a->size && a->n > 0; }

/* The server's end: the one client that connects within 30 s. */
static inline int pp_accept(int port) {
  int one = 1;
  int l = socket(AF_INET, SOCK_STREAM, 0);
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (bind(l, (struct sockaddr*)&sa, sizeof(sa)) || listen(l, 1)) bu_die("bind/listen");
  struct pollfd pfd = {l, POLLIN, 0};
  if (poll(&pfd, 1, 30000) != 1) bu_die("no client");
  int fd = accept(l, NULL, NULL);
  if (fd < 0) bu_die("accept");
  close(l);
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

/* The client's end, retrying for 5 s while the server starts. */
static inline int pp_connect(const char* addr, int port) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) bu_die("address");
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  for (int tries = 0; connect(fd, (struct sockaddr*)&sa, sizeof(sa)) != 0; ++tries) {
    if (tries == 100) bu_die("connect");
    close(fd);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    usleep(50000);
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

/* Sends (or receives) exactly len bytes on the connection. */
static inline void pp_full(int fd, void* p, size_t len, int sending) {
  char* b = (char*)p;
  size_t done = 0;
  while (done < len) {
    ssize_t r = sending ? send(fd, b + done, len - done, MSG_NOSIGNAL) : recv(fd, b + done, len - done, 0);
    if (r <= 0) bu_die(sending ? "send" : "recv");
    done += (size_t)r;
  }
}

static int pp_cmp_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

/* Prints "size rounds p50_us p99_us" of n half round trips (ns); exit
 * status 1 when there are none. */
static inline int pp_report(size_t size, uint64_t* half_ns, long n) {
  if (n <= 0) return 1;
  qsort(half_ns, (size_t)n, sizeof(*half_ns), pp_cmp_u64);
  printf("%zu %ld %.2f %.2f\n", size, n, half_ns[n / 2] / 1e3, half_ns[(n * 99) / 100] / 1e3);
  return 0;
}

/* When a client started now should stop (-t; UINT64_MAX: after -n only). */
static inline uint64_t pp_end(const struct pp_args* a) {
  return a->seconds > 0 ? bu_now_ns() + (uint64_t)(a->seconds * 1e9) : UINT64_MAX;
}
#endif
