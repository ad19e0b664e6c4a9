// The UDP endpoint facing RoCE stacks that are not uroce, which write IPv4
// identifications of their own (kernel rxe: the kernel's counter for the
// pair of hosts, with random jumps; RoCE NICs: counters of their own),
// played by a raw socket that writes the whole IPv4 header (root). A
// receiver believes such an identification on evidence (link/id_trust.h):
// uroced's record of the frame (daemon/frame_watch.h, run here in the test's
// process), a successor, a counter it follows. And a sender whose datagrams
// are dropped on their way out (nftables, in a network namespace of the
// test's own): every packet that does leave carries the right ICRC.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pcap/pcap.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "daemon/frame_watch.h"
#include "link/udp_link.h"
#include "wire/icrc.h"
#include "wire/ip_udp.h"

namespace uroce::link {
namespace {

using namespace uroce::wire;

// An address of lo that no other test uses, so the receiver can have the
// RoCE v2 port (uroced's watcher looks at port 4791 only).
IpAddr addr(uint8_t last) { return IpAddr::v4(htonl(0x7f4d0000u | last)); }  // 127.77.0.x

/// A RoCE v2 sender that writes its own IPv4 header: identification of its
/// choice, UDP checksum 0 (as rxe and NICs send), ICRC over those headers.
struct Foreign {
  int fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
  UdpAddr from;
  explicit Foreign(UdpAddr f) : from(f) {}
  ~Foreign() {
    if (fd >= 0) close(fd);
  }
  /// `flip`: after the ICRC is computed, byte `flip` of the BTH-and-after
  /// part is changed (corruption on the way).
  void send(Packet p, const UdpAddr& to, uint16_t id, int flip = -1) {
    const size_t n = encoded_size(p);
    std::vector<uint8_t> b(kIpv4HeaderBytes + kUdpHeaderBytes + n + kIcrcBytes);
    uint8_t* ib = b.data() + kIpv4HeaderBytes + kUdpHeaderBytes;
    ASSERT_EQ(encode(p, ib, n + kIcrcBytes), n);
    Ipv4UdpFields f;
    f.src = from.ip.ip4();
    f.dst = to.ip.ip4();
    f.sport = from.port;
    f.dport = to.port;
    f.id = id;
    build_ipv4_udp(f, n + kIcrcBytes, nullptr, b.data(), b.data() + kIpv4HeaderBytes);
    put_icrc(ib + n,
             icrc({b.data(), kIpv4HeaderBytes}, {b.data() + kIpv4HeaderBytes, kUdpHeaderBytes}, {ib, n}));
    if (flip >= 0) ib[flip] ^= 0x5a;
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = to.ip.ip4();
    ASSERT_EQ(sendto(fd, b.data(), b.size(), 0, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)),
              ssize_t(b.size()))
        << strerror(errno);
  }
};

Packet send_only(uint32_t dqp, uint32_t psn, const std::vector<uint8_t>& data) {
  Packet p;
  p.bth.opcode = opcode(Service::kUd, kSendOnly);
  p.bth.dest_qp = dqp;
  p.bth.psn = psn;
  p.qkey = 0x11111111;
  p.src_qp = 0x99;
  p.payload = std::span<const uint8_t>(data.data(), data.size());
  return p;
}

struct ForeignPeer : ::testing::Test {
  std::unique_ptr<UdpEndpoint> rx;
  std::vector<uint32_t> psns;  // delivered, in order
  std::vector<std::vector<uint8_t>> payloads;
  daemon::FrameWatch* watch = nullptr;
  std::unique_ptr<daemon::FrameWatch> owned;
  const IdWatchTable* mapped = nullptr;

  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "a raw socket (the foreign sender) needs root";
    UdpEndpoint::Options o;
    o.bind = UdpAddr{addr(1), kRoceV2Port};
    o.reuse_addr = true;
    auto e = UdpEndpoint::open(o);
    ASSERT_TRUE(e.is_ok()) << strerror(e.err());
    rx = std::move(e.value());
  }
  void TearDown() override {
    set_id_watch(nullptr);
    if (mapped) munmap(const_cast<IdWatchTable*>(mapped), sizeof(IdWatchTable));
  }
  /// uroced's frame watcher, in this process, its table mapped as a client maps it.
  void start_watch() {
    owned = std::make_unique<daemon::FrameWatch>();
    ASSERT_TRUE(owned->start());
    if (owned->fd() < 0) GTEST_SKIP() << "no packet socket";
    watch = owned.get();
    const int fd = watch->client_fd();
    ASSERT_GE(fd, 0);
    void* p = mmap(nullptr, sizeof(IdWatchTable), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    ASSERT_NE(p, MAP_FAILED);
    // Read-only for clients: a writable mapping is refused.
    const int fd2 = watch->client_fd();
    EXPECT_EQ(mmap(nullptr, sizeof(IdWatchTable), PROT_READ | PROT_WRITE, MAP_SHARED, fd2, 0), MAP_FAILED);
    close(fd2);
    mapped = static_cast<const IdWatchTable*>(p);
    set_id_watch(mapped);
  }
  /// Polls (the watcher too) until `n` packets were delivered or `ms` passed.
  void receive(size_t n, int ms) {
    for (int waited = 0; psns.size() < n && waited < ms; ++waited) {
      if (watch) watch->on_readable();
      rx->poll([&](const Packet& p, const UdpAddr&, const UdpAddr&) {
        psns.push_back(p.bth.psn);
        payloads.emplace_back(p.payload.begin(), p.payload.end());
      });
      usleep(1000);
    }
  }
};

TEST_F(ForeignPeer, AFirstPacketGoesOnceUrocedSawItsFrame) {
  // Expect: a UD SEND with identification 40000 from a peer never heard
  // before (UD is never retransmitted: without it, ibv_ud_pingpong with
  // rxe hangs) is delivered, on uroced's record of the frame.
  start_watch();
  Foreign f(UdpAddr{addr(2), 50000});
  ASSERT_GE(f.fd, 0);
  std::vector<uint8_t> data(100, 7);
  f.send(send_only(0x77, 5, data), rx->local(), 40000);
  receive(1, 2000);
  ASSERT_EQ(psns, (std::vector<uint32_t>{5}));
  EXPECT_EQ(payloads[0], data);
  EXPECT_EQ(rx->id_stats().vouched, 1u);
  EXPECT_GE(watch->recorded(), 1u);
}

TEST_F(ForeignPeer, WithoutAWatcherAFirstPacketNeedsASuccessor) {
  Foreign f(UdpAddr{addr(3), 50001});
  ASSERT_GE(f.fd, 0);
  std::vector<uint8_t> data(40, 1);
  // Expect: alone, it waits kWaitNs, then is dropped (counted).
  f.send(send_only(0x77, 1, data), rx->local(), 40000);
  receive(1, int(IdTrust::kWaitNs / 1'000'000) + 50);
  EXPECT_TRUE(psns.empty());
  EXPECT_EQ(rx->id_stats().unproven, 1u);
  // Expect: followed closely by another of the same sender, both go, in order.
  f.send(send_only(0x77, 2, data), rx->local(), 41000);
  f.send(send_only(0x78, 3, data), rx->local(), 41002);
  receive(2, 2000);
  EXPECT_EQ(psns, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(rx->id_stats().succeeded, 1u);
}

TEST_F(ForeignPeer, AKernelLikeCounterIsFollowedAcrossFlows) {
  // Expect: rxe's identifications (one counter for the pair of hosts, +1
  // per packet and random jumps) over 4 flows: every packet delivered, in
  // order; after the first, no packet waits.
  start_watch();
  std::mt19937 rng(7);
  std::vector<std::unique_ptr<Foreign>> flows;
  for (int i = 0; i < 4; ++i)
    flows.push_back(std::make_unique<Foreign>(UdpAddr{addr(4), uint16_t(50010 + i)}));
  std::vector<uint8_t> data(64, 3);
  uint16_t id = uint16_t(rng());
  if (id < 64) id += 64;
  constexpr uint32_t kN = 400;
  for (uint32_t i = 0; i < kN; ++i) {
    flows[i % 4]->send(send_only(0x80 + i % 4, i, data), rx->local(), id);
    id = uint16_t(id + 1 + rng() % 4);
    if (id < 64) id = 64;
  }
  receive(kN, 3000);
  ASSERT_EQ(psns.size(), kN);
  for (uint32_t i = 0; i < kN; ++i) EXPECT_EQ(psns[i], i);
  // The first on uroced's record (or its successor), all others on the counter.
  EXPECT_LE(rx->id_stats().parked, 1u);
  EXPECT_GE(rx->id_stats().vouched + rx->id_stats().succeeded, 1u);
  EXPECT_EQ(rx->id_stats().unproven, 0u);
}

TEST_F(ForeignPeer, CorruptedPacketsAreNeverBelieved) {
  // Expect: 3,000 packets each corrupted in one byte after its ICRC was
  // computed (not BTH byte 4, which the ICRC does not cover), between good
  // ones that keep the counter known: only the good ones are delivered.
  start_watch();
  Foreign f(UdpAddr{addr(5), 50020});
  std::mt19937 rng(11);
  std::vector<uint8_t> data(200);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i);
  uint16_t id = 30000;
  uint32_t good = 0;
  for (uint32_t i = 0; i < 3000; ++i) {
    if (i % 10 == 0) {
      f.send(send_only(0x90, 100000 + good, data), rx->local(), id++);
      ++good;
    }
    const size_t len = 12 + 4 + 200;  // BTH, DETH, payload
    int at = int(rng() % len);
    if (at == 4) at = 5;
    f.send(send_only(0x90, i, data), rx->local(), id++, at);
  }
  receive(good, 5000);
  for (int i = 0; i < 100; ++i) receive(good + 1, 1);  // anything more that would come
  ASSERT_EQ(psns.size(), good);
  for (uint32_t i = 0; i < good; ++i) {
    EXPECT_EQ(psns[i], 100000 + i);
    EXPECT_EQ(payloads[i], data);
  }
  EXPECT_GE(rx->stats().bad_icrc, 2900u);  // the rest solved for some identification and waited
}

/// In a network namespace of its own: nftables drops `pct` % of the UDP
/// datagrams to port `dport` on their way out; what does leave is captured on
/// lo and each frame's ICRC checked over the kernel's own headers. Returns
/// the number of bad frames (or 100 + a code when the setup failed).
int drop_on_output(int pct, uint16_t dport) {
  if (unshare(CLONE_NEWNET) != 0) return 101;
  if (system("ip link set lo up") != 0) return 102;
  const std::string rule =
      "nft add table ip t && nft add chain ip t o '{ type filter hook output priority 0; }' && "
      "nft add rule ip t o udp dport " +
      std::to_string(dport) + " numgen random mod 100 '<' " + std::to_string(pct) + " drop";
  if (system(rule.c_str()) != 0) return 103;
  char err[PCAP_ERRBUF_SIZE];
  pcap_t* live = pcap_create("lo", err);
  if (!live) return 104;
  pcap_set_snaplen(live, 65535);
  pcap_set_buffer_size(live, 32 << 20);
  pcap_set_immediate_mode(live, 1);
  if (pcap_activate(live) < 0) return 105;
  bpf_program prog;
  const std::string filter = "udp and dst port " + std::to_string(dport);
  if (pcap_compile(live, &prog, filter.c_str(), 1, PCAP_NETMASK_UNKNOWN) != 0 ||
      pcap_setfilter(live, &prog) != 0)
    return 106;
  pcap_setnonblock(live, 1, err);
  UdpEndpoint::Options o;
  o.bind = UdpAddr{IpAddr::v4(htonl(INADDR_LOOPBACK)), 50100};
  auto a = UdpEndpoint::open(o);
  if (!a.is_ok()) return 107;
  const UdpAddr to{IpAddr::v4(htonl(INADDR_LOOPBACK)), dport};
  std::vector<uint8_t> data(512, 9);
  Packet p;
  p.bth.opcode = opcode(Service::kRc, kSendOnly);
  p.bth.dest_qp = 0x55;
  p.payload = std::span<const uint8_t>(data.data(), data.size());
  uint32_t psn = 0;
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 4; ++i) {  // alone
      p.bth.psn = psn++;
      (void)a.value()->send(p, to);
    }
    a.value()->cork();  // and in GSO sends
    for (int i = 0; i < 8; ++i) {
      p.bth.psn = psn++;
      (void)a.value()->send(p, to);
    }
    a.value()->uncork();
  }
  int frames = 0, bad = 0;
  for (int idle = 0; idle < 20;) {
    pcap_pkthdr* h;
    const u_char* d;
    if (pcap_next_ex(live, &h, &d) != 1) {
      usleep(10000);
      ++idle;
      continue;
    }
    if (h->caplen < 14 + 28) continue;
    const uint8_t* ip = d + 14;
    const uint8_t* udp = ip + 20;
    const size_t ulen = h->caplen - 14 - 20;
    // Loopback keeps a GSO send whole: one frame, its datagrams back to back.
    const size_t seg = 12 + 512 + 4;
    for (size_t at = 8; at + seg <= ulen; at += seg) {
      uint8_t iph[20];
      memcpy(iph, ip, 20);
      const uint16_t id = uint16_t((ip[4] << 8 | ip[5]) + (at - 8) / seg);  // the k-th datagram's
      iph[4] = uint8_t(id >> 8);
      iph[5] = uint8_t(id);
      uint8_t u[8];
      memcpy(u, udp, 8);
      u[4] = uint8_t((seg + 8) >> 8);
      u[5] = uint8_t(seg + 8);
      iph[2] = uint8_t((seg + 28) >> 8);
      iph[3] = uint8_t(seg + 28);
      ++frames;
      bad += icrc({iph, 20}, {u, 8}, {udp + at, seg - 4}) != get_icrc(udp + at + seg - 4);
    }
  }
  pcap_close(live);
  fprintf(stderr, "drop_on_output: %u packets sent, %d captured, %d with a bad ICRC, %llu send errors\n", psn,
          frames, bad, (unsigned long long)a.value()->stats().send_errors);
  if (frames == 0 || frames >= int(psn)) return 108;  // nothing, or nothing dropped: no test
  return bad;
}

TEST(ForeignPeerOut, APacketDroppedOnItsWayOutChangesNoOtherPacketsIcrc) {
  if (geteuid() != 0) GTEST_SKIP() << "a network namespace and nftables need root";
  if (system("command -v nft >/dev/null && command -v ip >/dev/null") != 0) GTEST_SKIP() << "no nft or ip";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(30);
    _exit(drop_on_output(20, 50200));
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "bad frames (or >= 100: a setup step failed)";
}

}  // namespace
}  // namespace uroce::link
