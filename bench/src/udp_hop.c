/* What one daemon hop costs a RoCE v2 packet on this machine (issue 4,
 * "Demultiplexing"): a 2-byte request/response round trip between two
 * processes over 127.0.0.1 UDP, busy-polling,
 *   direct      client -> server by UDP, reply by UDP (each process owns its socket);
 *   hop-spin    client -> forwarder by UDP; the forwarder copies the datagram into a
 *               shared-memory slot the server polls; reply by UDP (what uroced's
 *               fallback does), the forwarder busy-polling its socket;
 *   hop-sleep   the same with the forwarder blocked in recv() (a daemon that does
 *               not burn a core).
 *   udp_hop MODE ITERATIONS
 * Prints: RESULT udp_hop mode=.. rtt_us=.. (median) rtt_min_us=.. */
#include "bench_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

struct slot {
  _Atomic uint64_t seq;
  char data[64];
};

static int udp_bound(uint16_t* port) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (fd < 0 || bind(fd, (struct sockaddr*)&a, sizeof(a)) != 0) bu_die("bind");
  socklen_t l = sizeof(a);
  getsockname(fd, (struct sockaddr*)&a, &l);
  *port = ntohs(a.sin_port);
  return fd;
}

static void send_to(int fd, uint16_t port, const char* b, size_t n) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (sendto(fd, b, n, 0, (struct sockaddr*)&a, sizeof(a)) != (ssize_t)n) bu_die("sendto");
}

static ssize_t recv_spin(int fd, char* b, size_t n) {
  for (;;) {
    ssize_t r = recv(fd, b, n, MSG_DONTWAIT);
    if (r >= 0) return r;
    if (errno != EAGAIN && errno != EINTR) bu_die("recv");
    bu_relax();
  }
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: udp_hop direct|hop-spin|hop-sleep ITERATIONS\n");
    return 2;
  }
  const char* mode = argv[1];
  const long iters = atol(argv[2]);
  const int hop = strcmp(mode, "direct") != 0;
  const int sleep_fwd = strcmp(mode, "hop-sleep") == 0;
  uint16_t cport, sport, fport;
  int cfd = udp_bound(&cport), sfd = udp_bound(&sport), ffd = udp_bound(&fport);
  struct slot* ring = mmap(NULL, sizeof(struct slot), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (ring == MAP_FAILED) bu_die("mmap");
  pid_t server = fork();
  if (server == 0) {
    bu_pin(0);
    char b[64];
    uint64_t seen = 0;
    for (;;) {
      if (hop) {
        uint64_t s;
        while ((s = atomic_load_explicit(&ring->seq, memory_order_acquire)) == seen) bu_relax();
        seen = s;
        memcpy(b, ring->data, 2);
      } else {
        recv_spin(sfd, b, sizeof(b));
      }
      send_to(sfd, cport, b, 2);  // the owner answers directly
    }
  }
  pid_t fwd = -1;
  if (hop) {
    fwd = fork();
    if (fwd == 0) {
      bu_pin(0);  // two cores: the daemon shares the server's
      char b[64];
      uint64_t n = 0;
      for (;;) {
        ssize_t r = sleep_fwd ? recv(ffd, b, sizeof(b), 0) : recv_spin(ffd, b, sizeof(b));
        if (r < 0) continue;
        memcpy(ring->data, b, (size_t)r);
        atomic_store_explicit(&ring->seq, ++n, memory_order_release);
      }
    }
  }
  bu_pin(1);
  double* rtt = malloc(sizeof(double) * (size_t)iters);
  char b[64] = "hi";
  for (long i = -1000; i < iters; ++i) {  // 1,000 warm-up round trips
    uint64_t t0 = bu_now_ns();
    send_to(cfd, hop ? fport : sport, b, 2);
    recv_spin(cfd, b, sizeof(b));
    if (i >= 0) rtt[i] = (double)(bu_now_ns() - t0) / 1000.0;
  }
  double min = rtt[0];
  for (long i = 0; i < iters; ++i)
    if (rtt[i] < min) min = rtt[i];
  printf("RESULT udp_hop mode=%s rtt_us=%.2f rtt_min_us=%.2f\n", mode, bu_median(rtt, (size_t)iters), min);
  kill(server, SIGKILL);
  if (fwd > 0) kill(fwd, SIGKILL);
  while (wait(NULL) > 0) {
  }
  return 0;
}
