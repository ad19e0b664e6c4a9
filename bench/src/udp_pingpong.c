/* Raw UDP ping-pong on 127.0.0.1 (or, with -H, the server's IPv4 address:
 * between two network namespaces), both ends busy-polling non-blocking
 * sockets: the floor of any design that moves each message through the
 * kernel's UDP stack (as RoCE v2 over a socket would).
 *   udp_pingpong [-a] [-H IPV4] server PORT MAXSEC
 *   udp_pingpong [-a] [-H IPV4] client PORT MS_PER_SIZE SIZE...   (SIZE <= 65487 with -a)
 * The server echoes every datagram and exits on an empty one or after MAXSEC.
 * -a (both ends): every message travels with a 20-byte second datagram in the
 * same send (UDP GSO; read as one with UDP_GRO and recvmsg), the size of an RC
 * ACK (BTH + AETH + ICRC): what an RC ping-pong must move per direction at
 * least, since each side waits for the ACK of its message and the peer's
 * reply (perftest's latency loop), and one GSO send is the cheapest way found
 * to hand the kernel two datagrams (two sends cost ~2.5x the extra here).
 * Per SIZE the client prints
 *   RESULT udp_pingpong size=.. rtt_us=.. (median batch) oneway_us=.. rtt_min_us=.. round_trips=.. lost=.. */
#include "bench_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

enum { kMaxDgram = 65507, kMaxBatches = 4096, kAck = 20 };
static char g_buf[kMaxDgram];
static int g_ack; /* -a */

/* One receive: recv, or with -a recvmsg with room for the GRO segment size. */
static ssize_t recv_one(int fd, int flags, struct sockaddr_in* from, socklen_t* flen) {
  if (!g_ack) return recvfrom(fd, g_buf, sizeof(g_buf), flags, (struct sockaddr*)from, flen);
  struct iovec iov = {g_buf, sizeof(g_buf)};
  char ctl[CMSG_SPACE(sizeof(int))];
  struct msghdr m = {.msg_name = from, .msg_namelen = flen ? *flen : 0, .msg_iov = &iov, .msg_iovlen = 1,
                     .msg_control = ctl, .msg_controllen = sizeof(ctl)};
  ssize_t n = recvmsg(fd, &m, flags);
  if (flen) *flen = m.msg_namelen;
  return n;
}

/* Sends SIZE bytes of msg; with -a (SIZE > 0) together with a kAck-byte
 * datagram in one GSO send: [msg, ack] or, for SIZE < kAck, [ack, msg] (only
 * the last segment may be shorter than the segment size). */
static void send_msg(int fd, const char* msg, size_t size, const struct sockaddr_in* to, socklen_t tolen) {
  if (!g_ack || size == 0) {
    sendto(fd, msg, size, 0, (const struct sockaddr*)to, tolen);
    return;
  }
  static char ack[kAck];
  struct iovec iov[2] = {{(void*)msg, size}, {ack, kAck}};
  if (size < kAck) {
    iov[0] = (struct iovec){ack, kAck};
    iov[1] = (struct iovec){(void*)msg, size};
  }
  char ctl[CMSG_SPACE(sizeof(uint16_t))];
  memset(ctl, 0, sizeof(ctl));
  struct msghdr m = {.msg_name = (void*)to, .msg_namelen = tolen, .msg_iov = iov, .msg_iovlen = 2,
                     .msg_control = ctl, .msg_controllen = sizeof(ctl)};
  struct cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_UDP;
  c->cmsg_type = UDP_SEGMENT;
  c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
  uint16_t seg = (uint16_t)(size < kAck ? kAck : size);
  memcpy(CMSG_DATA(c), &seg, sizeof(seg));
  if (sendmsg(fd, &m, 0) < 0) bu_die("sendmsg (UDP GSO)");
}

/* Waits for one datagram until deadline_ns; returns its length or -1. */
static ssize_t recv_until(int fd, uint64_t deadline_ns) {
  for (;;) {
    ssize_t n = recv_one(fd, MSG_DONTWAIT, NULL, NULL);
    if (n >= 0) return n;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) bu_die("recv");
    if (bu_now_ns() > deadline_ns) return -1;
  }
}

int main(int argc, char** argv) {
  const char* host = NULL;
  for (;;) {
    if (argc > 1 && strcmp(argv[1], "-a") == 0) {
      g_ack = 1;
      ++argv;
      --argc;
    } else if (argc > 2 && strcmp(argv[1], "-H") == 0) {
      host = argv[2];
      argv += 2;
      argc -= 2;
    } else {
      break;
    }
  }
  if (argc < 4) {
    fprintf(stderr, "usage: %s [-a] [-H IPV4] server PORT MAXSEC | [-a] [-H IPV4] client PORT MS_PER_SIZE SIZE...\n",
            argv[0]);
    return 2;
  }
  int server = strcmp(argv[1], "server") == 0;
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (host && inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
    fprintf(stderr, "udp_pingpong: %s is no IPv4 address\n", host);
    return 2;
  }
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) bu_die("socket");
  int one = 1;
  if (g_ack && setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) != 0) bu_die("UDP_GRO");
  if (server) {
    if (bind(fd, (struct sockaddr*)&addr, sizeof(addr)) != 0) bu_die("bind");
    uint64_t end = bu_now_ns() + (uint64_t)atoi(argv[3]) * 1000000000ull;
    struct sockaddr_in from;
    for (;;) {
      socklen_t flen = sizeof(from);
      ssize_t n = recv_one(fd, MSG_DONTWAIT, &from, &flen);
      if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) bu_die("recvfrom");
        if (bu_now_ns() > end) return 1;
        continue;
      }
      if (n == 0) return 0;
      send_msg(fd, g_buf, g_ack ? (size_t)n - kAck : (size_t)n, &from, flen);
    }
  }
  if (connect(fd, (struct sockaddr*)&addr, sizeof(addr)) != 0) bu_die("connect");
  double budget_ns = atof(argv[3]) * 1e6;
  static char msg[kMaxDgram];
  memset(msg, 0x42, sizeof(msg));
  static double per_rt[kMaxBatches];
  for (int a = 4; a < argc; ++a) {
    size_t size = bu_parse_size(argv[a]);
    if (size > kMaxDgram - (g_ack ? kAck : 0)) size = kMaxDgram - (g_ack ? kAck : 0);
    if (size == 0) size = 1;
    long lost = 0;
    uint64_t t = bu_now_ns();
    for (long warm = 0; bu_now_ns() - t < 5000000 || warm < 10; ++warm) {
      send_msg(fd, msg, size, NULL, 0);
      if (recv_until(fd, bu_now_ns() + 200000000ull) < 0) ++lost;
    }
    /* Batch of ~200 us, sized from the median of 9 single round trips. */
    double one_ns[9];
    for (int c = 0; c < 9; ++c) {
      uint64_t c0 = bu_now_ns();
      send_msg(fd, msg, size, NULL, 0);
      if (recv_until(fd, bu_now_ns() + 200000000ull) < 0) ++lost;
      one_ns[c] = (double)(bu_now_ns() - c0);
    }
    long batch = (long)(200000.0 / bu_median(one_ns, 9)) + 1;
    size_t nb = 0;
    uint64_t start = bu_now_ns(), now = start;
    while (nb < kMaxBatches && (now - start < budget_ns || nb < 5)) {
      uint64_t b0 = bu_now_ns();
      for (long i = 0; i < batch; ++i) {
        send_msg(fd, msg, size, NULL, 0);
        if (recv_until(fd, bu_now_ns() + 200000000ull) < 0) ++lost;
      }
      now = bu_now_ns();
      per_rt[nb++] = (double)(now - b0) / batch / 1e3;
    }
    double med = bu_median(per_rt, nb);
    printf("RESULT udp_pingpong%s size=%zu rtt_us=%.3f oneway_us=%.3f rtt_min_us=%.3f round_trips=%ld lost=%ld\n",
           g_ack ? "_ack" : "", size, med, med / 2, per_rt[0], (long)nb * batch, lost);
    fflush(stdout);
  }
  send(fd, msg, 0, 0); /* tells the server to exit */
  return 0;
}
