/* Raw UDP ping-pong on 127.0.0.1, both ends busy-polling non-blocking sockets:
 * the floor of any design that moves each message through the kernel's UDP
 * stack (as RoCE v2 over a socket would).
 *   udp_pingpong server PORT MAXSEC
 *   udp_pingpong client PORT MS_PER_SIZE SIZE...        (SIZE <= 65507)
 * The server echoes every datagram and exits on an empty one or after MAXSEC.
 * Per SIZE the client prints
 *   RESULT udp_pingpong size=.. rtt_us=.. (median batch) oneway_us=.. rtt_min_us=.. round_trips=.. lost=.. */
#include "bench_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

enum { kMaxDgram = 65507, kMaxBatches = 4096 };
static char g_buf[kMaxDgram];

/* Waits for one datagram until deadline_ns; returns its length or -1. */
static ssize_t recv_until(int fd, uint64_t deadline_ns) {
  for (;;) {
    ssize_t n = recv(fd, g_buf, sizeof(g_buf), MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) bu_die("recv");
    if (bu_now_ns() > deadline_ns) return -1;
  }
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s server PORT MAXSEC | client PORT MS_PER_SIZE SIZE...\n", argv[0]);
    return 2;
  }
  int server = strcmp(argv[1], "server") == 0;
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) bu_die("socket");
  if (server) {
    if (bind(fd, (struct sockaddr*)&addr, sizeof(addr)) != 0) bu_die("bind");
    uint64_t end = bu_now_ns() + (uint64_t)atoi(argv[3]) * 1000000000ull;
    struct sockaddr_in from;
    for (;;) {
      socklen_t flen = sizeof(from);
      ssize_t n = recvfrom(fd, g_buf, sizeof(g_buf), MSG_DONTWAIT, (struct sockaddr*)&from, &flen);
      if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) bu_die("recvfrom");
        if (bu_now_ns() > end) return 1;
        continue;
      }
      if (n == 0) return 0;
      sendto(fd, g_buf, (size_t)n, 0, (struct sockaddr*)&from, flen);
    }
  }
  if (connect(fd, (struct sockaddr*)&addr, sizeof(addr)) != 0) bu_die("connect");
  double budget_ns = atof(argv[3]) * 1e6;
  static char msg[kMaxDgram];
  memset(msg, 0x42, sizeof(msg));
  static double per_rt[kMaxBatches];
  for (int a = 4; a < argc; ++a) {
    size_t size = bu_parse_size(argv[a]);
    if (size > kMaxDgram) size = kMaxDgram;
    if (size == 0) size = 1;
    long lost = 0;
    uint64_t t = bu_now_ns();
    for (long warm = 0; bu_now_ns() - t < 5000000 || warm < 10; ++warm) {
      send(fd, msg, size, 0);
      if (recv_until(fd, bu_now_ns() + 200000000ull) < 0) ++lost;
    }
    /* Batch of ~200 us, sized from the median of 9 single round trips. */
    double one_ns[9];
    for (int c = 0; c < 9; ++c) {
      uint64_t c0 = bu_now_ns();
      send(fd, msg, size, 0);
      if (recv_until(fd, bu_now_ns() + 200000000ull) < 0) ++lost;
      one_ns[c] = (double)(bu_now_ns() - c0);
    }
    long batch = (long)(200000.0 / bu_median(one_ns, 9)) + 1;
    size_t nb = 0;
    uint64_t start = bu_now_ns(), now = start;
    while (nb < kMaxBatches && (now - start < budget_ns || nb < 5)) {
      uint64_t b0 = bu_now_ns();
      for (long i = 0; i < batch; ++i) {
        send(fd, msg, size, 0);
        if (recv_until(fd, bu_now_ns() + 200000000ull) < 0) ++lost;
      }
      now = bu_now_ns();
      per_rt[nb++] = (double)(now - b0) / batch / 1e3;
    }
    double med = bu_median(per_rt, nb);
    printf("RESULT udp_pingpong size=%zu rtt_us=%.3f oneway_us=%.3f rtt_min_us=%.3f round_trips=%ld lost=%ld\n",
           size, med, med / 2, per_rt[0], (long)nb * batch, lost);
    fflush(stdout);
  }
  send(fd, msg, 0, 0); /* tells the server to exit */
  return 0;
}
