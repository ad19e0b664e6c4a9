/* Raw AF_XDP ping-pong between two network namespaces: the floor of the
 * AF_XDP link (what RoCE v2 frames cost when user space moves whole frames
 * through AF_XDP sockets, both ends spinning on their rings), beside
 * udp_pingpong's floor for the UDP-socket link. Uses uroce's own pieces: the
 * XDP program that steers RoCE v2 frames by destination QP (daemon/xdp_steer.h,
 * generic mode) and the AF_XDP socket (link/xsk.h). Needs root (CAP_NET_RAW,
 * CAP_NET_ADMIN, CAP_BPF), like uroced.
 *   xdp_pingpong [-a] server IFNAME MAXSEC
 *   xdp_pingpong [-a] client IFNAME PEER_IPV4 PEER_MAC MS_PER_SIZE SIZE...
 * Frames are Ethernet + IPv4 + UDP (port 4791) + BTH (SEND ONLY to QP 0x11) +
 * SIZE bytes + a 4-byte ICRC field (not computed: nothing checks it here).
 * The server echoes each frame with the addresses swapped and exits on one
 * with no payload or after MAXSEC. -a (both ends): every message travels
 * with a second, ACK-sized frame (BTH + AETH + ICRC) in the same kick, and
 * each side answers only once it has both: what an RC ping-pong whose sends
 * are all signaled moves per direction at least (the message, and the ACK
 * of the peer's message, which the peer waits for). Per SIZE the client prints
 *   RESULT xdp_pingpong[_ack] size=.. rtt_us=.. (median batch) oneway_us=.. rtt_min_us=.. round_trips=..
 * lost=.. */
#include <arpa/inet.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "daemon/xdp_steer.h"
#include "link/xsk.h"
#include "wire/ip_udp.h"

namespace {

constexpr uint32_t kQpn = 0x11;
constexpr size_t kEth = 14, kBth = 12, kIcrc = 4, kAeth = 4;
constexpr size_t kHeaders = kEth + uroce::wire::kIpv4HeaderBytes + uroce::wire::kUdpHeaderBytes + kBth;

uint64_t now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

[[noreturn]] void die(const char* what, int err) {
  fprintf(stderr, "xdp_pingpong: %s: %s\n", what, strerror(err));
  exit(1);
}

struct Iface {
  int index = 0;
  uint8_t mac[6] = {};
  uint32_t ip = 0;  // network order
};

Iface interface_of(const char* name) {
  Iface f;
  f.index = int(if_nametoindex(name));
  if (!f.index) die(name, errno);
  const int s = socket(AF_INET, SOCK_DGRAM, 0);
  ifreq r{};
  snprintf(r.ifr_name, sizeof(r.ifr_name), "%s", name);
  if (ioctl(s, SIOCGIFHWADDR, &r) != 0) die("SIOCGIFHWADDR", errno);
  memcpy(f.mac, r.ifr_hwaddr.sa_data, 6);
  if (ioctl(s, SIOCGIFADDR, &r) != 0) die("SIOCGIFADDR", errno);
  f.ip = reinterpret_cast<sockaddr_in*>(&r.ifr_addr)->sin_addr.s_addr;
  close(s);
  return f;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using uroce::daemon::XdpSteer;
  using uroce::link::XskSocket;
  const char* prog = argv[0];
  const bool ack = argc > 1 && strcmp(argv[1], "-a") == 0;
  if (ack) --argc, ++argv;
  const int per_message = ack ? 2 : 1;  // frames each way per message
  const bool server = argc == 4 && strcmp(argv[1], "server") == 0;
  if (!server && !(argc >= 7 && strcmp(argv[1], "client") == 0)) {
    fprintf(
        stderr,
        "usage: %s [-a] server IFNAME MAXSEC | [-a] client IFNAME PEER_IPV4 PEER_MAC MS_PER_SIZE SIZE...\n",
        prog);
    return 2;
  }
  const Iface me = interface_of(argv[2]);
  auto steer = XdpSteer::attach(me.index, XdpSteer::Mode::kGeneric);
  if (!steer.is_ok()) die("attaching the XDP program", steer.err());
  auto xsk = XskSocket::open(me.index, 0, XskSocket::Options{});
  if (!xsk.is_ok()) die("AF_XDP socket", xsk.err());
  XskSocket& x = *xsk.value();
  if (auto st = steer.value()->set_socket(0, x.fd()); !st.is_ok()) die("socket map", st.err());
  if (auto st = steer.value()->steer(kQpn, 0); !st.is_ok()) die("QP map", st.err());

  if (server) {
    const uint64_t end = now_ns() + uint64_t(atoi(argv[3])) * 1000000000ull;
    bool done = false;
    int pending = 0;  // frames echoed, not yet kicked
    while (!done) {
      if (now_ns() > end) return 1;
      x.receive([&](std::span<const uint8_t> f) {
        if (f.size() <= kHeaders + kIcrc) {
          done = true;
          return;
        }
        std::span<uint8_t> out = x.tx_frame();
        if (out.size() < f.size()) return;  // all in flight: lost
        memcpy(out.data(), f.data(), f.size());
        memcpy(out.data(), f.data() + 6, 6);  // back to the sender
        memcpy(out.data() + 6, f.data(), 6);
        memcpy(out.data() + kEth + 12, f.data() + kEth + 16, 4);  // IPv4 source <-> destination
        memcpy(out.data() + kEth + 16, f.data() + kEth + 12, 4);
        x.tx_commit(f.size());
        ++pending;
      });
      if (pending >= per_message) {  // the message (and its ACK) back in one kick
        x.flush();
        pending = 0;
      }
    }
    return 0;
  }

  uint8_t peer_mac[6];
  if (sscanf(argv[4], "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &peer_mac[0], &peer_mac[1], &peer_mac[2], &peer_mac[3],
             &peer_mac[4], &peer_mac[5]) != 6) {
    fprintf(stderr, "xdp_pingpong: %s is no MAC address\n", argv[4]);
    return 2;
  }
  in_addr peer{};
  if (inet_pton(AF_INET, argv[3], &peer) != 1) {
    fprintf(stderr, "xdp_pingpong: %s is no IPv4 address\n", argv[3]);
    return 2;
  }
  // Queues a frame of `size` bytes after the BTH (kicked by the caller).
  auto queue_frame = [&](size_t size) {
    std::span<uint8_t> f = x.tx_frame();
    const size_t len = kHeaders + size + kIcrc;
    if (f.size() < len) return false;
    memcpy(f.data(), peer_mac, 6);
    memcpy(f.data() + 6, me.mac, 6);
    f[12] = 0x08, f[13] = 0x00;  // IPv4
    uroce::wire::Ipv4UdpFields h;
    h.src = me.ip;
    h.dst = peer.s_addr;
    h.sport = 49152;
    uroce::wire::build_ipv4_udp(h, kBth + size + kIcrc, nullptr, f.data() + kEth, f.data() + kEth + 20);
    uint8_t* bth = f.data() + kEth + 28;
    memset(bth, 0, kBth);
    bth[0] = 0x04;                 // RC SEND ONLY
    bth[2] = 0xff, bth[3] = 0xff;  // P_Key
    bth[5] = uint8_t(kQpn >> 16), bth[6] = uint8_t(kQpn >> 8), bth[7] = uint8_t(kQpn);
    memset(bth + kBth, 0x42, size + kIcrc);
    x.tx_commit(len);
    return true;
  };
  auto send_frame = [&](size_t size) {
    const bool ok = queue_frame(size) && (!ack || size == 0 || queue_frame(kAeth));
    x.flush();
    return ok;
  };
  // A message's frames back within `timeout_ns`; false if they did not all come.
  auto await = [&](uint64_t timeout_ns) {
    const uint64_t end = now_ns() + timeout_ns;
    for (int got = 0;;) {
      got += x.receive([](std::span<const uint8_t>) {}, per_message - got);
      if (got == per_message) return true;
      if (now_ns() > end) return false;
    }
  };
  const double budget_ns = atof(argv[5]) * 1e6;
  const size_t max_size = x.max_frame() - kHeaders - kIcrc;
  for (int a = 6; a < argc; ++a) {
    size_t size = std::min(size_t(strtoul(argv[a], nullptr, 0)), max_size);
    if (size == 0) size = 1;
    long lost = 0;
    auto round_trip = [&] {
      if (!send_frame(size) || !await(200'000'000)) ++lost;
    };
    for (uint64_t t = now_ns(); now_ns() - t < 5'000'000;) round_trip();
    std::vector<double> one;
    for (int c = 0; c < 9; ++c) {
      const uint64_t c0 = now_ns();
      round_trip();
      one.push_back(double(now_ns() - c0));
    }
    const long batch = long(200000.0 / std::max(median(one), 1.0)) + 1;
    std::vector<double> per_rt;
    for (uint64_t start = now_ns();
         per_rt.size() < 4096 && (now_ns() - start < budget_ns || per_rt.size() < 5);) {
      const uint64_t b0 = now_ns();
      for (long i = 0; i < batch; ++i) round_trip();
      per_rt.push_back(double(now_ns() - b0) / double(batch) / 1e3);
    }
    const double med = median(per_rt);
    printf(
        "RESULT xdp_pingpong%s size=%zu rtt_us=%.3f oneway_us=%.3f rtt_min_us=%.3f round_trips=%ld "
        "lost=%ld\n",
        ack ? "_ack" : "", size, med, med / 2, *std::min_element(per_rt.begin(), per_rt.end()),
        long(per_rt.size()) * batch, lost);
    fflush(stdout);
  }
  send_frame(0);  // tells the server to stop
  return 0;
}
