// uroced's linger (daemon/linger.h): after its process destroyed a network
// QP, uroced answers the peer's retransmissions of requests the QP executed
// (their ACK was lost) with an ACK of the QP's service — RC, and the XRC
// target QP (whose responder is RC's with XRC opcodes; issue 14 found its
// duplicates unanswered) — and nothing else.
#include "daemon/linger.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "wire/ip_udp.h"

namespace uroce::daemon {
namespace {

using namespace uroce::wire;
using link::IpAddr;
using link::UdpAddr;

IpAddr addr(uint8_t last) { return IpAddr::v4(htonl(0x7f4d0100u | last)); }  // 127.77.1.x
constexpr uint16_t kPeerSport = 50300, kOurSport = 50301;
constexpr uint32_t kQpn = 0x1234, kPeerQpn = 0x5678, kEpsn = 100, kMsn = 7;

struct LingerTest : ::testing::Test {
  bool xrc = false;  // an XRC target QP lingers (XrcLingerTest)
  Lingers lingers;
  int rx_fd = -1;
  std::unique_ptr<link::UdpEndpoint> peer_tx, peer_rx;  // the peer's flow: sends from its port, ACKs to 4791

  void SetUp() override {
    // The destroyed QP's receiving socket: <ours>:4791, connected to the peer's flow.
    rx_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    ASSERT_GE(rx_fd, 0);
    const int one = 1;
    setsockopt(rx_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    link::SockAddr a = link::sockaddr_of(UdpAddr{addr(1), kRoceV2Port});
    ASSERT_EQ(bind(rx_fd, a.get(), a.len), 0) << strerror(errno);
    link::SockAddr p = link::sockaddr_of(UdpAddr{addr(2), kPeerSport});
    ASSERT_EQ(connect(rx_fd, p.get(), p.len), 0);
    LingerArgs args;
    args.qpn = kQpn;
    args.dest_qpn = kPeerQpn;
    args.epsn = kEpsn;
    args.msn = kMsn;
    args.sport = kOurSport;
    args.xrc = xrc;
    lingers.add(rx_fd, args, 0);
    ASSERT_TRUE(lingers.owns(rx_fd));
    link::UdpEndpoint::Options o;
    o.bind = UdpAddr{addr(2), kPeerSport};
    o.reuse_addr = true;
    auto t = link::UdpEndpoint::open(o);
    ASSERT_TRUE(t.is_ok());
    peer_tx = std::move(t.value());
    o.bind = UdpAddr{addr(2), kRoceV2Port};
    auto r = link::UdpEndpoint::open(o);
    ASSERT_TRUE(r.is_ok());
    peer_rx = std::move(r.value());
  }

  /// Sends a request of `service`/`op` with `psn` to the lingering QP, lets
  /// uroced's linger answer, and returns what the peer got back.
  std::vector<Packet> exchange(Service service, Op op, uint32_t psn) {
    static const uint8_t payload[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    Packet p;
    p.bth.opcode = opcode(service, op);
    p.bth.dest_qp = kQpn;
    p.bth.psn = psn;
    p.bth.ack_req = true;  // as a requester marks each message's last packet
    p.xrc_srqn = 0x42;
    p.va = 0x1000;
    p.rkey = 9;
    p.dma_len = 8;
    if (op != kReadRequest) p.payload = payload;
    EXPECT_TRUE(peer_tx->send(p, UdpAddr{addr(1), kRoceV2Port}));
    pollfd pf{rx_fd, POLLIN, 0};
    EXPECT_EQ(::poll(&pf, 1, 2000), 1);
    lingers.on_readable(rx_fd, 0, [](uint32_t) { return int32_t(0); });
    std::vector<Packet> got;
    for (int i = 0; i < 20; ++i) {  // whatever comes within 200 ms
      pollfd q{peer_rx->fd(), POLLIN, 0};
      if (::poll(&q, 1, 10) == 1)
        peer_rx->poll([&](const Packet& a, const UdpAddr&, const UdpAddr&) { got.push_back(a); });
    }
    return got;
  }
};

TEST_F(LingerTest, AnRcDuplicateGetsAnAck) {
  // Expect: a SEND below the expected PSN (executed, its ACK lost): an RC
  // ACK naming the peer QP, with the PSN and the QP's last MSN.
  auto got = exchange(Service::kRc, kSendOnly, kEpsn - 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].bth.opcode, opcode(Service::kRc, kAcknowledge));
  EXPECT_EQ(got[0].bth.dest_qp, kPeerQpn);
  EXPECT_EQ(got[0].bth.psn, kEpsn - 1);
  EXPECT_EQ(got[0].msn, kMsn);
}

struct XrcLingerTest : LingerTest {
  XrcLingerTest() { xrc = true; }
};

TEST_F(XrcLingerTest, AnXrcDuplicateGetsAnXrcAck) {
  // Expect: the same for an XRC target QP: an XRC ACK.
  auto got = exchange(Service::kXrc, kWriteOnly, kEpsn - 5);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].bth.opcode, opcode(Service::kXrc, kAcknowledge));
  EXPECT_EQ(got[0].bth.dest_qp, kPeerQpn);
  EXPECT_EQ(got[0].bth.psn, kEpsn - 5);
}

TEST_F(LingerTest, WhatWasNeverExecutedOrNeedsMemoryGetsNothing) {
  // Expect: a request at or past the expected PSN was never executed; a
  // READ needs the memory that is gone; a UC request is never answered.
  EXPECT_TRUE(exchange(Service::kRc, kSendOnly, kEpsn).empty());
  EXPECT_TRUE(exchange(Service::kXrc, kSendOnly, kEpsn + 3).empty());
  EXPECT_TRUE(exchange(Service::kRc, kReadRequest, kEpsn - 1).empty());
  EXPECT_TRUE(exchange(Service::kUc, kSendOnly, kEpsn - 1).empty());
  EXPECT_TRUE(exchange(Service::kRc, kCompareSwap, kEpsn - 1).empty());
}

}  // namespace
}  // namespace uroce::daemon
