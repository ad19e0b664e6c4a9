// packet_pair: raw Ethernet frames through AF_PACKET sockets, the kernel's
// own way for a program to send and receive whole frames: what a user who
// has no RDMA NIC (and no uroce) would pick instead of a RAW_PACKET QP, and
// the bar bench group `raw` holds raw_ethernet_bw to.
//
//   packet_pair sink IFNAME UDP_PORT SECONDS
//       counts the IPv4/UDP frames to UDP_PORT the interface receives
//       (recvmmsg, 64 at a time) and prints, once SECONDS have passed since
//       the first: frames=N seconds=S rate_mpps=R bw_MBps=B size=L
//   packet_pair source IFNAME DST_MAC SRC_IP DST_IP UDP_PORT FRAME_BYTES SECONDS
//       sends IPv4/UDP frames of FRAME_BYTES (Ethernet header included, no
//       FCS; UDP checksum 0, IPv4 header checksum set) with sendmmsg, 64 at
//       a time, for SECONDS and prints: frames=N seconds=S rate_mpps=R
//
// Needs CAP_NET_RAW. Bounded: the sink gives up SECONDS + 10 s after it
// starts if nothing (more) comes.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static int open_packet(const char* ifname, int* ifindex) {
  int s = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_IP));
  if (s < 0) {
    perror("socket(AF_PACKET)");
    exit(1);
  }
  struct sockaddr_ll a;
  memset(&a, 0, sizeof(a));
  a.sll_family = AF_PACKET;
  a.sll_protocol = htons(ETH_P_IP);
  a.sll_ifindex = (int)if_nametoindex(ifname);
  if (!a.sll_ifindex || bind(s, (struct sockaddr*)&a, sizeof(a)) != 0) {
    perror("bind");
    exit(1);
  }
  int big = 16 << 20;
  setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
  setsockopt(s, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big));
  *ifindex = a.sll_ifindex;
  return s;
}

static uint16_t ip_csum(const uint8_t* h) {
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += (uint32_t)(h[i] << 8 | h[i + 1]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return (uint16_t)~sum;
}

static int sink(const char* ifname, int port, double seconds) {
  int ifindex;
  int s = open_packet(ifname, &ifindex);
  struct timeval tv = {0, 200000};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  static uint8_t bufs[BATCH][2048];
  struct iovec iov[BATCH];
  struct mmsghdr m[BATCH];
  for (int i = 0; i < BATCH; ++i) {
    iov[i].iov_base = bufs[i];
    iov[i].iov_len = sizeof(bufs[i]);
    memset(&m[i], 0, sizeof(m[i]));
    m[i].msg_hdr.msg_iov = &iov[i];
    m[i].msg_hdr.msg_iovlen = 1;
  }
  const double start = now_s();
  double first = 0, last = 0;
  unsigned long long n = 0, bytes = 0;
  unsigned size = 0;
  while (now_s() - start < seconds + 10) {
    if (first && now_s() - first >= seconds) break;
    int got = recvmmsg(s, m, BATCH, 0, NULL);
    if (got <= 0) continue;
    for (int i = 0; i < got; ++i) {
      // SOCK_RAW: each frame from its Ethernet header.
      const uint8_t* f = bufs[i];
      unsigned len = m[i].msg_len;
      if (len < 14 + 20 + 8 || f[14 + 9] != 17) continue;
      const uint8_t* udp = f + 14 + (f[14] & 0xf) * 4;
      if ((udp[2] << 8 | udp[3]) != port) continue;
      if (!first) first = now_s();
      last = now_s();
      ++n;
      bytes += len;
      size = len;
    }
  }
  const double span = last > first ? last - first : 0;
  printf("frames=%llu seconds=%.3f rate_mpps=%.6f bw_MBps=%.3f size=%u\n", n, span, span ? n / span / 1e6 : 0,
         span ? bytes / span / 1e6 : 0, size);
  return n ? 0 : 1;
}

static int source(const char* ifname, const char* dmac, const char* sip, const char* dip, int port, unsigned len,
                  double seconds) {
  int ifindex;
  int s = open_packet(ifname, &ifindex);
  if (len < 14 + 20 + 8 || len > 2000) {
    fprintf(stderr, "frame bytes: 42..2000\n");
    return 2;
  }
  uint8_t f[2048];
  memset(f, 0, sizeof(f));
  unsigned mac[6];
  if (sscanf(dmac, "%x:%x:%x:%x:%x:%x", &mac[0], &mac[1], &mac[2], &mac[3], &mac[4], &mac[5]) != 6) return 2;
  for (int i = 0; i < 6; ++i) f[i] = (uint8_t)mac[i];
  f[12] = 0x08;
  uint8_t* ip = f + 14;
  ip[0] = 0x45;
  ip[2] = (uint8_t)((len - 14) >> 8);
  ip[3] = (uint8_t)(len - 14);
  ip[8] = 64;
  ip[9] = 17;
  inet_pton(AF_INET, sip, ip + 12);
  inet_pton(AF_INET, dip, ip + 16);
  const uint16_t c = ip_csum(ip);
  ip[10] = (uint8_t)(c >> 8);
  ip[11] = (uint8_t)c;
  uint8_t* udp = ip + 20;
  udp[0] = 0x13;
  udp[1] = 0x8a;  // 5002
  udp[2] = (uint8_t)(port >> 8);
  udp[3] = (uint8_t)port;
  udp[4] = (uint8_t)((len - 34) >> 8);
  udp[5] = (uint8_t)(len - 34);
  struct sockaddr_ll to;
  memset(&to, 0, sizeof(to));
  to.sll_family = AF_PACKET;
  to.sll_ifindex = ifindex;
  to.sll_halen = 6;
  memcpy(to.sll_addr, f, 6);
  struct iovec iov = {f, len};
  struct mmsghdr m[BATCH];
  for (int i = 0; i < BATCH; ++i) {
    memset(&m[i], 0, sizeof(m[i]));
    m[i].msg_hdr.msg_iov = &iov;
    m[i].msg_hdr.msg_iovlen = 1;
    m[i].msg_hdr.msg_name = &to;
    m[i].msg_hdr.msg_namelen = sizeof(to);
  }
  const double start = now_s();
  unsigned long long n = 0;
  double t;
  while ((t = now_s()) - start < seconds) {
    int sent = sendmmsg(s, m, BATCH, 0);
    if (sent > 0) n += (unsigned long long)sent;
  }
  printf("frames=%llu seconds=%.3f rate_mpps=%.6f\n", n, t - start, n / (t - start) / 1e6);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 5 && !strcmp(argv[1], "sink")) return sink(argv[2], atoi(argv[3]), atof(argv[4]));
  if (argc == 9 && !strcmp(argv[1], "source"))
    return source(argv[2], argv[3], argv[4], argv[5], atoi(argv[6]), (unsigned)atoi(argv[7]), atof(argv[8]));
  fprintf(stderr,
          "usage: %s sink IFNAME UDP_PORT SECONDS | source IFNAME DST_MAC SRC_IP DST_IP UDP_PORT FRAME_BYTES "
          "SECONDS\n",
          argv[0]);
  return 2;
}
