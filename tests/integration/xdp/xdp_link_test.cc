// XdpSteer (daemon/xdp_steer.h), XskSocket (link/xsk.h) and uroced's
// lending of interfaces (daemon/xdp_ports.h, its requests) on a veth pair
// in a network namespace of the test's own: frames sent through an AF_XDP
// socket on one end arrive at the other, where the XDP program hands those
// for a steered QP to that end's AF_XDP socket and the rest to the kernel
// (a UDP socket on port 4791 gets them, as the UDP-socket link would);
// and the link's frames (link/xdp_link.h) to and from the UDP-socket link.
#include "link/xdp_link.h"

#include <arpa/inet.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "contract/control_protocol.h"
#include "contract/shm_layout.h"
#include "daemon/requests.h"
#include "daemon/xdp_ports.h"
#include "daemon/xdp_steer.h"
#include "link/udp_link.h"
#include "link/xsk.h"
#include "wire/ip_udp.h"
#include "wire/opcodes.h"
#include "wire/packet.h"

namespace uroce {
namespace {

using daemon::XdpSteer;
using link::XskSocket;

constexpr size_t kEth = 14, kBth = 12;
constexpr const char* kSendIf = "uxa";
constexpr const char* kRecvIf = "uxb";
constexpr const char* kRecvIp = "10.98.0.2";
constexpr const char* kFarIp = "10.98.1.3";

struct Iface {
  int index = 0;
  uint8_t mac[6] = {};
};

Iface iface_of(const char* name) {
  Iface f;
  f.index = int(if_nametoindex(name));
  const int s = socket(AF_INET, SOCK_DGRAM, 0);
  ifreq r{};
  snprintf(r.ifr_name, sizeof(r.ifr_name), "%s", name);
  if (ioctl(s, SIOCGIFHWADDR, &r) == 0) memcpy(f.mac, r.ifr_hwaddr.sa_data, 6);
  close(s);
  return f;
}

class XdpSteerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (geteuid() != 0) {
      skip_ = "needs root (CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW)";
      return;
    }
    // A namespace of this process's own: the veth pair goes with it.
    if (unshare(CLONE_NEWNET) != 0) {
      skip_ = "no network namespaces here";
      return;
    }
    const std::string cmds =
        std::string("ip link set lo up && ip link add ") + kSendIf + " type veth peer name " + kRecvIf +
        " && ip addr add 10.98.0.1/24 dev " + kSendIf + " && ip addr add " + kRecvIp + "/24 dev " + kRecvIf +
        " && ip link set " + kSendIf + " up && ip link set " + kRecvIf + " up" +
        // Both ends are this namespace's: the kernel takes a frame from one
        // of its own addresses only with accept_local.
        " && sysctl -qw net.ipv4.conf." + kRecvIf + ".accept_local=1" +
        // An address the kernel sends to across the veth (a frame to the
        // receiving end's own address would stay on loopback): kFarIp is
        // reached through the sending end, at the receiving end's MAC.
        " && ip route add " + kFarIp + "/32 dev " + kSendIf + " && ip neigh add " + kFarIp +
        " lladdr $(ip -br link show " + kRecvIf + " | awk '{print $3}') dev " + kSendIf + " nud permanent";
    ASSERT_EQ(system(cmds.c_str()), 0) << cmds;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    send_ = iface_of(kSendIf);
    recv_ = iface_of(kRecvIf);
    ASSERT_NE(send_.index, 0);
    ASSERT_NE(recv_.index, 0);
  }

  /// The program on the receiving end with QP `qpn` steered to a fresh
  /// AF_XDP socket there (map slot `slot`), and a socket on the sending end.
  struct Steered {
    std::unique_ptr<XdpSteer> steer;
    std::unique_ptr<XskSocket> in, out;
  };
  void steer_to(uint32_t qpn, uint32_t slot, Steered* s) {
    auto steer = XdpSteer::attach(recv_.index, XdpSteer::Mode::kGeneric);
    ASSERT_TRUE(steer.is_ok()) << strerror(steer.err());
    auto in = XskSocket::open(recv_.index, 0, {});
    ASSERT_TRUE(in.is_ok()) << strerror(in.err());
    auto out = XskSocket::open(send_.index, 0, {});
    ASSERT_TRUE(out.is_ok()) << strerror(out.err());
    s->steer = std::move(steer.value());
    s->in = std::move(in.value());
    s->out = std::move(out.value());
    ASSERT_TRUE(s->steer->set_socket(slot, s->in->fd()).is_ok());
    ASSERT_TRUE(s->steer->steer(qpn, slot).is_ok());
  }

  /// uroced's request hooks with one device: the receiving end.
  daemon::Requests::Hooks device_hooks(daemon::XdpPorts* ports) const {
    daemon::Requests::Hooks hooks;
    hooks.devices = [dev_index = uint32_t(recv_.index)] {
      core::DeviceInfo d{};
      snprintf(d.name, sizeof(d.name), "uroce_%s", kRecvIf);
      d.ifindex = dev_index;
      return std::vector<core::DeviceInfo>{d};
    };
    hooks.xdp = ports;
    return hooks;
  }

  /// A RoCE v2 frame (RC SEND ONLY) from the sending end to `qpn` at the
  /// receiving end, with `tag` as its payload's first byte.
  std::vector<uint8_t> frame(uint32_t qpn, uint8_t tag) const {
    std::vector<uint8_t> f(kEth + 28 + kBth + 16 + 4, 0);
    memcpy(f.data(), recv_.mac, 6);
    memcpy(f.data() + 6, send_.mac, 6);
    f[12] = 0x08;
    wire::Ipv4UdpFields h;
    inet_pton(AF_INET, "10.98.0.1", &h.src);
    inet_pton(AF_INET, kRecvIp, &h.dst);
    h.sport = 49152;
    wire::build_ipv4_udp(h, kBth + 16 + 4, nullptr, f.data() + kEth, f.data() + kEth + 20);
    uint8_t* bth = f.data() + kEth + 28;
    bth[0] = 0x04;
    bth[2] = bth[3] = 0xff;
    bth[5] = uint8_t(qpn >> 16), bth[6] = uint8_t(qpn >> 8), bth[7] = uint8_t(qpn);
    bth[kBth] = tag;
    return f;
  }
  static void send(XskSocket& x, const std::vector<uint8_t>& f) {
    std::span<uint8_t> out = x.tx_frame();
    ASSERT_GE(out.size(), f.size());
    memcpy(out.data(), f.data(), f.size());
    x.tx_commit(f.size());
    x.flush();
  }
  /// The frames `x` receives within `ms`.
  static std::vector<std::vector<uint8_t>> receive(XskSocket& x, int ms) {
    std::vector<std::vector<uint8_t>> got;
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
      x.receive([&](std::span<const uint8_t> f) { got.emplace_back(f.begin(), f.end()); });
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return got;
  }
  /// A UDP socket on the receiving end's 4791 (what the UDP-socket link binds).
  static int udp_socket() {
    const int s = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(wire::kRoceV2Port);
    inet_pton(AF_INET, kRecvIp, &a.sin_addr);
    EXPECT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << strerror(errno);
    return s;
  }
  /// The first payload bytes (BTH + tag) of the datagrams `s` gets within `ms`.
  static std::vector<uint8_t> udp_tags(int s, int ms) {
    std::vector<uint8_t> tags;
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
      uint8_t buf[256];
      const ssize_t n = recv(s, buf, sizeof(buf), 0);
      if (n > ssize_t(kBth)) tags.push_back(buf[kBth]);
      if (n < 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return tags;
  }
  static uint32_t attached_program(int ifindex) {
    uint32_t id = 0;
    if (bpf_xdp_query_id(ifindex, XDP_FLAGS_SKB_MODE, &id) != 0) return UINT32_MAX;
    return id;
  }

  static inline std::string skip_;
  Iface send_, recv_;
};

TEST_F(XdpSteerTest, SteersItsQpsAndPassesTheRestToTheKernel) {
  Steered st;
  ASSERT_NO_FATAL_FAILURE(steer_to(0x123, 3, &st));
  const int udp = udp_socket();

  const std::vector<uint8_t> mine = frame(0x123, 1);
  send(*st.out, mine);
  send(*st.out, frame(0x456, 2));  // a QP nobody steered: the kernel's
  const auto got = receive(*st.in, 300);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], mine);  // the whole frame, as sent
  EXPECT_EQ(udp_tags(udp, 300), std::vector<uint8_t>{2});
  const XdpSteer::Counts c = st.steer->counts();
  EXPECT_EQ(c.steered, 1u);
  EXPECT_EQ(c.passed, 1u);

  // Steered to a slot without a socket (its process is gone): the kernel's too.
  st.steer->clear_socket(3);
  send(*st.out, frame(0x123, 3));
  EXPECT_TRUE(receive(*st.in, 100).empty());
  EXPECT_EQ(udp_tags(udp, 300), std::vector<uint8_t>{3});
  // Unsteered again: the kernel's, counted as passed.
  ASSERT_TRUE(st.steer->set_socket(3, st.in->fd()).is_ok());
  st.steer->unsteer(0x123);
  send(*st.out, frame(0x123, 4));
  EXPECT_TRUE(receive(*st.in, 100).empty());
  EXPECT_EQ(udp_tags(udp, 300), std::vector<uint8_t>{4});
  EXPECT_EQ(st.steer->counts().passed, 3u);
  close(udp);
}

TEST_F(XdpSteerTest, TheProgramLeavesWithItsOwner) {
  ASSERT_EQ(attached_program(recv_.index), 0u);
  {
    auto steer = XdpSteer::attach(recv_.index, XdpSteer::Mode::kGeneric);
    ASSERT_TRUE(steer.is_ok()) << strerror(steer.err());
    EXPECT_NE(attached_program(recv_.index), 0u);
    // One program per interface: a second owner is told so.
    auto second = XdpSteer::attach(recv_.index, XdpSteer::Mode::kGeneric);
    EXPECT_FALSE(second.is_ok());
    EXPECT_EQ(second.err(), EBUSY);
  }
  EXPECT_EQ(attached_program(recv_.index), 0u);
  // And the interface carries the kernel's traffic as before.
  auto out = XskSocket::open(send_.index, 0, {});
  ASSERT_TRUE(out.is_ok());
  const int udp = udp_socket();
  send(*out.value(), frame(0x123, 5));
  EXPECT_EQ(udp_tags(udp, 300), std::vector<uint8_t>{5});
  close(udp);
}

TEST_F(XdpSteerTest, AnAfXdpSocketCarriesManyFramesBothWays) {
  Steered st;
  ASSERT_NO_FATAL_FAILURE(steer_to(0x77, 0, &st));
  // More frames than either ring holds: buffers are recycled on both sides.
  constexpr int kFrames = 3000;
  int received = 0;
  auto check = [&](std::span<const uint8_t> g) {
    EXPECT_EQ(g[kEth + 28 + kBth], uint8_t(received));  // in order
    ++received;
  };
  for (int i = 0; i < kFrames; ++i) {
    std::vector<uint8_t> f = frame(0x77, uint8_t(i));
    std::span<uint8_t> o;
    for (int t = 0; t < 1000 && (o = st.out->tx_frame()).empty(); ++t) {
      st.out->flush();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    ASSERT_FALSE(o.empty()) << "no send frame came back at " << i;
    memcpy(o.data(), f.data(), f.size());
    st.out->tx_commit(f.size());
    if (i % 16 == 15) st.out->flush();
    st.in->receive(check);
  }
  st.out->flush();
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (received < kFrames && std::chrono::steady_clock::now() < end) st.in->receive(check);
  // veth drops nothing between two sockets that keep up; the receiver's
  // rings may overflow while this one thread sends: every frame is either
  // received or counted as dropped.
  EXPECT_EQ(uint64_t(received) + st.in->dropped(), uint64_t(kFrames));
  EXPECT_GT(received, kFrames / 2);
}

// One flush hands the kernel every frame queued before it: copy mode sends
// at most 32 per sendto() and says EAGAIN for the rest (which waited for
// the next send, or for retransmission, before XskSocket kicked again).
TEST_F(XdpSteerTest, OneFlushSendsAWholeBurst) {
  Steered st;
  ASSERT_NO_FATAL_FAILURE(steer_to(0x77, 0, &st));
  constexpr int kBurst = 200;  // under both rings' 512, over the kernel's 32 per call
  for (int i = 0; i < kBurst; ++i) {
    const std::vector<uint8_t> f = frame(0x77, uint8_t(i));
    std::span<uint8_t> o = st.out->tx_frame();
    ASSERT_GE(o.size(), f.size()) << "frame " << i;
    memcpy(o.data(), f.data(), f.size());
    st.out->tx_commit(f.size());
  }
  st.out->flush();
  int got = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (got < kBurst && std::chrono::steady_clock::now() < end)
    got += st.in->receive([](std::span<const uint8_t>) {});
  EXPECT_EQ(uint64_t(got) + st.in->dropped(), uint64_t(kBurst));
  EXPECT_EQ(got, kBurst);
}

// Frames the kernel will not take (the interface is down) stay on the send
// ring and the port keeps them pending, but after a flush that moved none
// it waits a back-off before the next try, instead of a system call at
// every poll; once the interface is up again they leave.
TEST_F(XdpSteerTest, AStalledSendRingIsRetriedAfterABackOff) {
  Steered st;
  ASSERT_NO_FATAL_FAILURE(steer_to(0x78, 0, &st));
  link::XdpPort::Options so;
  memcpy(so.mac, send_.mac, 6);
  link::XdpPort out(std::move(st.out), so);
  ASSERT_EQ(system((std::string("ip link set ") + kSendIf + " down").c_str()), 0);
  const std::vector<uint8_t> f = frame(0x78, 1);
  ASSERT_TRUE(out.send_frame(f).is_ok());
  uint64_t now = fast_now_ns();
  EXPECT_TRUE(out.tx_pending(now));
  out.flush();  // the kernel refuses: nothing moved
  now = fast_now_ns();
  EXPECT_FALSE(out.tx_pending(now)) << "retried at once";
  EXPECT_TRUE(out.tx_pending(now + link::XdpPort::kRetryMaxNs)) << "given up";
  out.flush();  // a second try that moved nothing doubles the wait
  now = fast_now_ns();
  EXPECT_FALSE(out.tx_pending(now + link::XdpPort::kRetryMinNs));
  // Up again, with the route and neighbour the link's going down removed
  // (the other cases send through them).
  const std::string up = std::string("ip link set ") + kSendIf + " up && ip route replace " + kFarIp +
                         "/32 dev " + kSendIf + " && ip neigh replace " + kFarIp +
                         " lladdr $(ip -br link show " + kRecvIf + " | awk '{print $3}') dev " + kSendIf +
                         " nud permanent";
  ASSERT_EQ(system(up.c_str()), 0) << up;
  out.flush();
  EXPECT_FALSE(out.tx_pending(fast_now_ns() + link::XdpPort::kRetryMaxNs)) << "still pending once up";
  auto got = receive(*st.in, 300);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], f);
}

// uroced lends an interface to one process at a time; the frames of the
// QPs that process steers go to its socket; its end gives the interface back.
TEST_F(XdpSteerTest, UrocedLendsAnInterfaceToOneProcessAtATime) {
  daemon::XdpPorts ports;
  constexpr int kA = 7, kB = 8;  // two clients (connections)
  auto fd = ports.open(kA, uint32_t(recv_.index));
  ASSERT_TRUE(fd.is_ok()) << strerror(fd.err());
  auto other = ports.open(kB, uint32_t(recv_.index));
  EXPECT_FALSE(other.is_ok());
  EXPECT_EQ(other.err(), EBUSY);
  // The client sets the socket up (no privilege needed) and says so.
  auto in = XskSocket::bind(fd.value(), recv_.index, 0, {});
  ASSERT_TRUE(in.is_ok()) << strerror(in.err());
  EXPECT_EQ(ports.ready(kB, uint32_t(recv_.index)).err(), EPERM);
  EXPECT_EQ(ports.steer(kB, uint32_t(recv_.index), 0x321, true).err(), EPERM);
  ASSERT_TRUE(ports.ready(kA, uint32_t(recv_.index)).is_ok());
  ASSERT_TRUE(ports.steer(kA, uint32_t(recv_.index), 0x321, true).is_ok());
  auto out = XskSocket::open(send_.index, 0, {});
  ASSERT_TRUE(out.is_ok());
  const int udp = udp_socket();
  send(*out.value(), frame(0x321, 1));
  EXPECT_EQ(receive(*in.value(), 200).size(), 1u);
  // Another client freeing that number changes nothing; its owner freeing it does.
  ports.qpn_freed(kB, 0x321);
  send(*out.value(), frame(0x321, 2));
  EXPECT_EQ(receive(*in.value(), 200).size(), 1u);
  ports.qpn_freed(kA, 0x321);
  send(*out.value(), frame(0x321, 3));
  EXPECT_TRUE(receive(*in.value(), 100).empty());
  EXPECT_EQ(udp_tags(udp, 300), std::vector<uint8_t>{3});
  // The client goes: the program leaves the interface, the next client may take it.
  ports.client_gone(kA);
  EXPECT_EQ(attached_program(recv_.index), 0u);
  EXPECT_EQ(ports.size(), 0u);
  in.value().reset();
  auto next = ports.open(kB, uint32_t(recv_.index));
  ASSERT_TRUE(next.is_ok()) << strerror(next.err());
  close(next.value());
  close(udp);
}

// The requests: only a device's interface, and only the client's own QPs.
TEST_F(XdpSteerTest, RequestsLendOnlyDevicesAndSteerOnlyOwnQps) {
  daemon::XdpPorts ports;
  const int host = memfd_create("host", MFD_CLOEXEC);
  const uint32_t dev_index = uint32_t(recv_.index);
  daemon::Requests req(host, device_hooks(&ports));
  constexpr int kA = 100, kB = 101;
  ASSERT_TRUE(req.open(kA, getpid(), true));
  ASSERT_TRUE(req.open(kB, getpid(), true));
  auto ask = [&](int client, control::MsgType t, uint32_t ifindex, uint32_t qpn = 0, uint32_t on = 0,
                 int passed = -1) {
    control::Request r{};
    r.type = uint32_t(t);
    r.version = control::kProtoVersion;
    r.arg[0] = ifindex;
    r.arg[1] = on;
    r.qpn = qpn;
    return req.handle(client, &r, sizeof(r), passed);
  };
  // Not a device (the sending end is no device here): refused.
  EXPECT_EQ(ask(kA, control::MsgType::kXskOpen, uint32_t(send_.index)).reply->status, ENODEV);
  auto a = ask(kA, control::MsgType::kXskOpen, dev_index);
  ASSERT_EQ(a.reply->status, 0);
  ASSERT_GE(a.fd, 0);
  EXPECT_TRUE(a.close_fd);
  EXPECT_EQ(ask(kB, control::MsgType::kXskOpen, dev_index).reply->status, EBUSY);
  auto in = XskSocket::bind(fcntl(a.fd, F_DUPFD_CLOEXEC, 0), recv_.index, 0, {});
  close(a.fd);
  ASSERT_TRUE(in.is_ok());
  EXPECT_EQ(ask(kA, control::MsgType::kXskReady, dev_index).reply->status, 0);
  // A QP number of B's: never steered to A.
  const int seg = memfd_create("seg", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(seg, 1 << 20), 0);
  const uint64_t magic = core::kSegMagic;
  ASSERT_EQ(pwrite(seg, &magic, sizeof(magic), 0), ssize_t(sizeof(magic)));
  ASSERT_EQ(fcntl(seg, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  control::Request reg{};
  reg.type = uint32_t(control::MsgType::kRegisterCtx);
  reg.version = control::kProtoVersion;
  reg.arg[0] = 1;  // and one QP number
  reg.off = 4096;
  auto r = req.handle(kB, &reg, sizeof(reg), seg);
  ASSERT_EQ(r.reply->status, 0);
  const uint32_t b_qpn = r.reply->qpn;
  ASSERT_NE(b_qpn, 0u);
  EXPECT_EQ(ask(kA, control::MsgType::kXskSteer, dev_index, b_qpn, 1).reply->status, EPERM);
  // A's own: steered.
  const int seg_a = memfd_create("seg", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(seg_a, 1 << 20), 0);
  ASSERT_EQ(pwrite(seg_a, &magic, sizeof(magic), 0), ssize_t(sizeof(magic)));
  ASSERT_EQ(fcntl(seg_a, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  r = req.handle(kA, &reg, sizeof(reg), seg_a);
  ASSERT_EQ(r.reply->status, 0);
  const uint32_t a_qpn = r.reply->qpn;
  EXPECT_EQ(ask(kA, control::MsgType::kXskSteer, dev_index, a_qpn, 1).reply->status, 0);
  auto out = XskSocket::open(send_.index, 0, {});
  ASSERT_TRUE(out.is_ok());
  send(*out.value(), frame(a_qpn, 1));
  send(*out.value(), frame(b_qpn, 2));
  const auto got = receive(*in.value(), 200);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0][kEth + 28 + kBth], 1);
  // A's connection closes: the interface is the kernel's again.
  req.close(kA);
  EXPECT_EQ(attached_program(recv_.index), 0u);
  req.close(kB);
  close(host);
}

// Flow steering rules (kRawRule, docs/raw-ethernet.md): only the
// interface's client may add one; the program steers what a rule matches,
// and nothing else, to that client's socket; a removed rule steers nothing.
TEST_F(XdpSteerTest, RawRulesSteerWhatTheyMatchToTheInterfacesClientOnly) {
  daemon::XdpPorts ports;
  const int host = memfd_create("host", MFD_CLOEXEC);
  const uint32_t dev_index = uint32_t(recv_.index);
  daemon::Requests req(host, device_hooks(&ports));
  constexpr int kA = 100, kB = 101;
  ASSERT_TRUE(req.open(kA, getpid(), true));
  ASSERT_TRUE(req.open(kB, getpid(), true));
  control::Request r{};
  r.type = uint32_t(control::MsgType::kXskOpen);
  r.version = control::kProtoVersion;
  r.arg[0] = dev_index;
  auto a = req.handle(kA, &r, sizeof(r), -1);
  ASSERT_EQ(a.reply->status, 0);
  auto in = XskSocket::bind(fcntl(a.fd, F_DUPFD_CLOEXEC, 0), recv_.index, 0, {});
  close(a.fd);
  ASSERT_TRUE(in.is_ok());
  r.type = uint32_t(control::MsgType::kXskReady);
  ASSERT_EQ(req.handle(kA, &r, sizeof(r), -1).reply->status, 0);
  // UDP destination port 5001 (and the layer bits that say "UDP").
  auto rule = [&](int client, uint64_t id, bool on) {
    control::RawRuleRequest m{};
    m.req.type = uint32_t(control::MsgType::kRawRule);
    m.req.version = control::kProtoVersion;
    m.req.off = id;
    m.req.arg[0] = dev_index;
    m.req.arg[1] = on ? 1 : 0;
    m.val.dst_port = htons(5001);
    m.mask.dst_port = 0xffff;
    m.val.layers = wire::kLayerUdp;
    m.mask.layers = wire::kLayerL4;
    return req.handle(client, &m, sizeof(m), -1).reply->status;
  };
  EXPECT_EQ(rule(kB, 1, true), EPERM) << "not the interface's client";
  ASSERT_EQ(rule(kA, 7, true), 0);
  auto udp_to = [&](uint16_t dport, uint8_t tag) {
    std::vector<uint8_t> f = frame(0x123456, tag);  // a RoCE frame for no steered QP...
    f[kEth + 20 + 2] = uint8_t(dport >> 8);         // ...sent to another UDP port
    f[kEth + 20 + 3] = uint8_t(dport);
    return f;
  };
  auto out = XskSocket::open(send_.index, 0, {});
  ASSERT_TRUE(out.is_ok());
  send(*out.value(), udp_to(5002, 1));
  send(*out.value(), udp_to(5001, 2));
  auto got = receive(*in.value(), 200);
  ASSERT_EQ(got.size(), 1u) << "only what the rule matches";
  EXPECT_EQ(got[0][kEth + 28 + kBth], 2);
  EXPECT_EQ(rule(kA, 8, false), ENOENT);
  ASSERT_EQ(rule(kA, 7, false), 0);
  send(*out.value(), udp_to(5001, 3));
  EXPECT_TRUE(receive(*in.value(), 100).empty()) << "the rule is gone";
  req.close(kA);
  req.close(kB);
  close(host);
}

// The AF_XDP link's frames (link/xdp_link.h): between two ports, and with
// the UDP-socket link both ways (the ICRC over the headers each side
// really sent and received), corrupted frames counted and dropped.
TEST_F(XdpSteerTest, FramesCarryRocePacketsToAndFromTheUdpLink) {
  Steered st;
  ASSERT_NO_FATAL_FAILURE(steer_to(0x500, 0, &st));
  link::XdpPort::Options ro, so;
  memcpy(ro.mac, recv_.mac, 6);
  memcpy(so.mac, send_.mac, 6);
  link::XdpPort in(std::move(st.in), ro);
  auto out = std::make_unique<link::XdpPort>(std::move(st.out), so);
  link::IpAddr send_ip, recv_ip;
  uint32_t a;
  inet_pton(AF_INET, "10.98.0.1", &a);
  send_ip = link::IpAddr::v4(a);
  inet_pton(AF_INET, kRecvIp, &a);
  recv_ip = link::IpAddr::v4(a);
  const link::UdpAddr from{send_ip, 0xc123}, to{recv_ip, wire::kRoceV2Port};

  std::vector<uint8_t> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 7);
  auto packet = [&](uint32_t qpn, uint32_t psn) {
    wire::Packet p;
    p.bth.opcode = wire::opcode(wire::Service::kRc, wire::kSendOnly);
    p.bth.dest_qp = qpn;
    p.bth.psn = psn;
    p.payload = std::span<const uint8_t>(data.data(), 1000);
    return p;
  };
  struct Got {
    uint32_t psn;
    std::vector<uint8_t> payload;
    link::UdpAddr from;
  };
  auto collect = [](std::vector<Got>* got) {
    return [got](const wire::Packet& p, const link::UdpAddr& f, const link::UdpAddr&) {
      got->push_back({p.bth.psn, std::vector<uint8_t>(p.payload.begin(), p.payload.end()), f});
    };
  };
  auto poll_xdp = [&](std::vector<Got>* got, size_t n) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    auto on = collect(got);
    while (got->size() < n && std::chrono::steady_clock::now() < end) in.poll(on);
  };

  // Port to port.
  wire::Packet p = packet(0x500, 1);
  ASSERT_TRUE(out->send(p, from, to, recv_.mac).is_ok());
  out->flush();
  std::vector<Got> got;
  poll_xdp(&got, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].psn, 1u);
  EXPECT_EQ(got[0].payload, data);
  EXPECT_TRUE(same_addr(got[0].from, from));
  EXPECT_EQ(in.stats().received, 1u);

  // From the UDP-socket link (the kernel wrote those headers, to kFarIp
  // across the veth): checked over the headers as they came, accepted.
  link::UdpEndpoint::Options uo;
  uo.bind = link::UdpAddr{send_ip, 0xc124};
  auto udp_out = link::UdpEndpoint::open(uo);
  ASSERT_TRUE(udp_out.is_ok()) << strerror(udp_out.err());
  inet_pton(AF_INET, kFarIp, &a);
  p = packet(0x500, 2);
  ASSERT_TRUE(udp_out.value()->send(p, link::UdpAddr{link::IpAddr::v4(a), wire::kRoceV2Port}).is_ok());
  got.clear();
  poll_xdp(&got, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].psn, 2u);
  EXPECT_EQ(got[0].from.port, 0xc124);

  // A reply and an ACK the UDP link sent together (one UDP GSO send, the
  // ACK its short last segment): the veth (its offloads on, Linux's
  // default) carries them whole, as one frame; both packets come out.
  udp_out.value()->cork();
  p = packet(0x500, 3);
  ASSERT_TRUE(udp_out.value()->send(p, link::UdpAddr{link::IpAddr::v4(a), wire::kRoceV2Port}).is_ok());
  wire::Packet ack;
  ack.bth.opcode = wire::opcode(wire::Service::kRc, wire::kAcknowledge);
  ack.bth.dest_qp = 0x500;
  ack.bth.psn = 4;
  ack.syndrome = wire::syndrome_ack(wire::kCreditsInvalid);
  ASSERT_TRUE(udp_out.value()->send(ack, link::UdpAddr{link::IpAddr::v4(a), wire::kRoceV2Port}).is_ok());
  udp_out.value()->uncork();
  got.clear();
  poll_xdp(&got, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].psn, 3u);
  EXPECT_EQ(got[0].payload, data);
  EXPECT_EQ(got[1].psn, 4u);
  EXPECT_EQ(in.stats().gso_runs, 1u) << "the veth cut the run: nothing to take apart";
  EXPECT_EQ(in.stats().bad_icrc, 0u);

  // To the UDP-socket link: a QP nobody steered goes to the kernel, whose
  // socket gets it; the UDP link's receiver checks our headers' ICRC.
  link::UdpEndpoint::Options ri;
  ri.bind = link::UdpAddr{recv_ip, wire::kRoceV2Port};
  auto udp_in = link::UdpEndpoint::open(ri);
  ASSERT_TRUE(udp_in.is_ok()) << strerror(udp_in.err());
  p = packet(0x600, 5);
  ASSERT_TRUE(out->send(p, from, to, recv_.mac).is_ok());
  out->flush();
  std::vector<Got> via_udp;
  {
    auto on = collect(&via_udp);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (via_udp.empty() && std::chrono::steady_clock::now() < end) udp_in.value()->poll(on);
  }
  ASSERT_EQ(via_udp.size(), 1u);
  EXPECT_EQ(via_udp[0].psn, 5u);
  EXPECT_EQ(via_udp[0].payload, data);
  EXPECT_EQ(udp_in.value()->stats().bad_icrc, 0u);

  // Corruption (the injector changes bytes the ICRC covers): every
  // corrupted frame the port receives is counted, none handed on.
  out.reset();  // one socket per queue: the sending end's goes first
  link::XdpPort::Options bad = so;
  bad.faults.corrupt = 1.0;
  bad.faults.seed = 5;
  auto bad_xsk = XskSocket::open(send_.index, 0, {});
  ASSERT_TRUE(bad_xsk.is_ok()) << strerror(bad_xsk.err());
  link::XdpPort corrupting(std::move(bad_xsk.value()), bad);
  for (uint32_t i = 0; i < 20; ++i) {
    p = packet(0x500, 100 + i);
    ASSERT_TRUE(corrupting.send(p, from, to, recv_.mac).is_ok());
  }
  corrupting.flush_faults();
  got.clear();
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  auto on = collect(&got);
  while (in.stats().bad_icrc + in.stats().malformed < 20 && std::chrono::steady_clock::now() < end)
    in.poll(on);
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(in.stats().bad_icrc + in.stats().malformed, 20u);
  EXPECT_EQ(in.stats().received, 4u);
}

// An engine asleep in epoll wakes when a frame waits in its socket's ring
// (the AF_XDP socket's receive path signals it, as a UDP socket's does).
TEST_F(XdpSteerTest, EpollWakesForAWaitingFrame) {
  Steered st;
  ASSERT_NO_FATAL_FAILURE(steer_to(0x99, 0, &st));
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, st.in->fd(), &ev), 0);
  epoll_event got[1];
  EXPECT_EQ(epoll_wait(ep, got, 1, 0), 0);  // nothing yet
  for (int round = 0; round < 3; ++round) {
    // Asleep first, then the frame comes.
    std::thread later([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      send(*st.out, frame(0x99, uint8_t(round)));
    });
    EXPECT_EQ(epoll_wait(ep, got, 1, 2000), 1) << "round " << round;
    later.join();
    EXPECT_EQ(st.in->receive([](std::span<const uint8_t>) {}), 1);
    EXPECT_EQ(epoll_wait(ep, got, 1, 0), 0);  // taken: not readable any more
  }
  close(ep);
}

}  // namespace
}  // namespace uroce
