// The UDP endpoint of the network link (src/link/udp_link) on loopback:
// packets of every shape arrive intact; the ICRC catches every corrupted
// one; faults held back by the injector still go to their own destination;
// and, captured live on the interface (root only), the packets the kernel
// really sent carry the IP header our ICRC assumes (identification 0) and
// pass the independent checker. Peers that are not uroce (identifications
// of their own): foreign_peer_test.cc.
#include "link/udp_link.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <pcap/pcap.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/clock.h"
#include "wire/icrc.h"
#include "wire/ip_udp.h"
#include "wire/pcap_writer.h"

namespace uroce::link {
namespace {

using namespace uroce::wire;

uint16_t port(int k) {
  const char* b = getenv("UROCE_TEST_UDP_PORT");
  return uint16_t((b ? atoi(b) : 19800) + k);
}
IpAddr lo() { return IpAddr::v4(htonl(INADDR_LOOPBACK)); }
IpAddr lo6() {
  IpAddr a;
  a.b[15] = 1;  // ::1
  return a;
}

std::unique_ptr<UdpEndpoint> endpoint(int k, FaultConfig faults = {}, const IpAddr& at = lo()) {
  UdpEndpoint::Options o;
  o.bind = UdpAddr{at, port(k)};
  o.faults = faults;
  auto e = UdpEndpoint::open(o);
  EXPECT_TRUE(e.is_ok()) << strerror(e.err());
  return e.is_ok() ? std::move(e.value()) : nullptr;
}

struct Got {
  Packet p;
  std::vector<uint8_t> payload;
  UdpAddr from;
};

/// Polls until `n` packets were accepted, or `datagrams` read (whether
/// accepted or not), or 5 s passed.
std::vector<Got> receive(UdpEndpoint& e, size_t n, uint64_t datagrams = UINT64_MAX) {
  std::vector<Got> got;
  for (int waited = 0; got.size() < n && e.stats().received < datagrams && waited < 5000;) {
    pollfd pf{e.fd(), POLLIN, 0};
    if (::poll(&pf, 1, 100) <= 0) {
      waited += 100;
      continue;
    }
    e.poll([&](const Packet& p, const UdpAddr& from, const UdpAddr&) {
      Got g{p, std::vector<uint8_t>(p.payload.begin(), p.payload.end()), from};
      g.p.payload = {};
      got.push_back(std::move(g));
    });
  }
  return got;
}

Packet sample(uint32_t i, const std::vector<uint8_t>& data) {
  static const Op ops[] = {kSendOnly, kWriteOnlyImm, kReadRequest, kAcknowledge, kCompareSwap, kSendFirst};
  Packet p;
  const Op op = ops[i % 6];
  p.bth.opcode = opcode(Service::kRc, op);
  p.bth.dest_qp = 0x100 + i;
  p.bth.psn = i;
  p.va = 0x1000 + 8 * i;
  p.rkey = i;
  p.dma_len = i;
  p.imm = htonl(i);
  p.syndrome = syndrome_ack(kCreditsInvalid);
  p.msn = i;
  const OpInfo* info = op_info(p.bth.opcode);
  const uint32_t len = info->payload == Payload::kNone ? 0 : info->payload == Payload::kFull ? 256 : i % 300;
  p.payload = std::span<const uint8_t>(data.data(), len);
  return p;
}

void every_shape_arrives_intact(const IpAddr& at, int k) {
  auto a = endpoint(k, {}, at), b = endpoint(k + 1, {}, at);
  ASSERT_TRUE(a && b);
  std::vector<uint8_t> data(300);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 3);
  constexpr uint32_t n = 300;
  for (uint32_t i = 0; i < n; ++i) {
    Packet p = sample(i, data);
    ASSERT_TRUE(a->send(p, b->local()));
  }
  auto got = receive(*b, n);  // 300 datagrams fit the endpoint's 8 MiB socket buffer
  ASSERT_EQ(got.size(), n);
  for (uint32_t i = 0; i < n; ++i) {
    Packet want = sample(i, data);
    EXPECT_EQ(got[i].p.bth.opcode, want.bth.opcode);
    EXPECT_EQ(got[i].p.bth.psn, i);
    EXPECT_EQ(got[i].p.bth.dest_qp, 0x100 + i);
    EXPECT_EQ(got[i].payload.size(), want.payload.size());
    EXPECT_TRUE(std::equal(got[i].payload.begin(), got[i].payload.end(), data.begin()));
    EXPECT_EQ(got[i].from.port, port(k));
    EXPECT_TRUE(got[i].from.ip == at);
  }
  EXPECT_EQ(b->stats().bad_icrc, 0u);
}

TEST(UdpLink, PacketsOfEveryShapeArriveIntact) { every_shape_arrives_intact(lo(), 0); }

TEST(UdpLink, PacketsOfEveryShapeArriveIntactOverIpv6) { every_shape_arrives_intact(lo6(), 20); }

TEST(UdpLink, CorkedPacketsLeaveAsGsoRunsAndArriveIntact) {
  // While corked, runs of equal-size packets to one destination leave as UDP
  // GSO sends (each datagram's ICRC computed for the identification Linux
  // gives it); the receiver gets them through GRO and finds each packet's
  // identification from its ICRC. Order, content and destinations survive,
  // and no packet fails its ICRC.
  auto a = endpoint(10), b = endpoint(11), c = endpoint(12);
  ASSERT_TRUE(a && b && c);
  std::vector<uint8_t> data(1024);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 7 + 1);
  auto write = [&](Op op, uint32_t psn, size_t len) {
    Packet p;
    p.bth.opcode = opcode(Service::kRc, op);
    p.bth.dest_qp = 0x42;
    p.bth.psn = psn;
    p.va = 0x1000;
    p.rkey = 7;
    p.dma_len = 1 << 20;
    p.payload = std::span<const uint8_t>(data.data(), len);
    return p;
  };
  std::vector<std::pair<uint32_t, size_t>> to_b;  // PSN, payload length
  a->cork();
  uint32_t psn = 0;
  Packet first = write(kWriteFirst, psn, 1024);
  ASSERT_TRUE(a->send(first, b->local()));
  to_b.push_back({psn++, 1024});
  for (int i = 0; i < 150; ++i) {  // more than one GSO send holds (62 of 1,040 bytes)
    Packet m = write(kWriteMiddle, psn, 1024);
    ASSERT_TRUE(a->send(m, b->local()));
    to_b.push_back({psn++, 1024});
  }
  Packet last = write(kWriteLast, psn, 100);
  ASSERT_TRUE(a->send(last, b->local()));
  to_b.push_back({psn++, 100});
  for (uint32_t i = 0; i < 3; ++i) {  // another destination in between
    Packet m = write(kWriteMiddle, 1000 + i, 1024);
    ASSERT_TRUE(a->send(m, c->local()));
  }
  Packet ack;
  ack.bth.opcode = opcode(Service::kRc, kAcknowledge);
  ack.bth.dest_qp = 0x42;
  ack.bth.psn = psn;
  ack.syndrome = syndrome_ack(kCreditsInvalid);
  ASSERT_TRUE(a->send(ack, b->local()));
  to_b.push_back({psn++, 0});
  EXPECT_EQ(a->stats().sent, 0u) << "nothing leaves before uncork()";
  a->uncork();
  EXPECT_EQ(a->stats().sent, to_b.size() + 3);
  EXPECT_EQ(a->stats().send_errors, 0u);

  auto got = receive(*b, to_b.size());
  ASSERT_EQ(got.size(), to_b.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].p.bth.psn, to_b[i].first) << i;
    ASSERT_EQ(got[i].payload.size(), to_b[i].second) << i;
    EXPECT_TRUE(std::equal(got[i].payload.begin(), got[i].payload.end(), data.begin())) << i;
  }
  EXPECT_EQ(b->stats().bad_icrc, 0u);
  EXPECT_EQ(b->stats().received, to_b.size());
  auto at_c = receive(*c, 3);
  ASSERT_EQ(at_c.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(at_c[i].p.bth.psn, 1000 + i);
  EXPECT_EQ(c->stats().bad_icrc, 0u);
}

// Options::timestamps: a packet carries the kernel's receive time on the
// process's fast clock, so a packet that waited in the socket before the
// process read it shows it waited (a requester's round trips end there);
// without the option, 0 (unknown).
TEST(UdpLink, TimestampsSayWhenThePacketArrivedNotWhenItWasRead) {
  auto a = endpoint(14);
  UdpEndpoint::Options o;
  o.bind = UdpAddr{lo(), port(15)};
  o.timestamps = true;
  auto stamped = UdpEndpoint::open(o);
  ASSERT_TRUE(stamped.is_ok()) << strerror(stamped.err());
  auto b = std::move(stamped.value());
  auto c = endpoint(16);
  ASSERT_TRUE(a && c);
  std::vector<uint8_t> data(64, 1);
  Packet p = sample(0, data);
  // The kernel turns receive stamping on for the whole host from a work
  // queue after the first socket asks; until then it stamps a datagram when
  // it is read. Wait (bounded) until a datagram that waited shows it.
  for (int tries = 0;; ++tries) {
    ASSERT_LT(tries, 100) << "the kernel never began stamping on receive";
    ASSERT_TRUE(a->send(p, b->local()));
    usleep(5'000);
    auto warm = receive(*b, 1);
    const uint64_t now = fast_now_ns();
    ASSERT_EQ(warm.size(), 1u);
    if (now - warm[0].p.rx_ns >= 2'000'000u) break;
  }
  const uint64_t before = fast_now_ns();
  ASSERT_TRUE(a->send(p, b->local()));
  ASSERT_TRUE(a->send(p, c->local()));
  const uint64_t sent = fast_now_ns();
  usleep(30'000);  // both wait in their sockets
  auto got = receive(*b, 1);
  const uint64_t read = fast_now_ns();
  ASSERT_EQ(got.size(), 1u);
  // Within the sends (loopback delivers during the call), give or take the
  // two clocks' difference in rate (1 % at most: common/clock.h).
  EXPECT_GE(got[0].p.rx_ns + 1'000'000, before) << "arrived before it was sent";
  EXPECT_LE(got[0].p.rx_ns, sent + 1'000'000) << "arrived after it was sent";
  EXPECT_GE(read - got[0].p.rx_ns, 20'000'000u) << "the 30 ms in the socket are not in the arrival time";
  auto plain = receive(*c, 1);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].p.rx_ns, 0u);
}

// Options::ecn: what the endpoint sends is ECN-capable (ECT(0)); a packet
// that arrives marked Congestion Experienced (here: sent with CE by a
// socket that plays the marking queue) says so (Packet::ce); a CNP is
// counted and handed on for its requester.
TEST(UdpLink, EcnMarksWhatItSendsAndSeesCongestionExperienced) {
  UdpEndpoint::Options o;
  o.bind = UdpAddr{lo(), port(17)};
  o.ecn = true;
  auto ea = UdpEndpoint::open(o);
  o.bind = UdpAddr{lo(), port(18)};
  auto eb = UdpEndpoint::open(o);
  ASSERT_TRUE(ea.is_ok() && eb.is_ok());
  auto a = std::move(ea.value()), b = std::move(eb.value());
  auto queue = endpoint(19);
  ASSERT_TRUE(queue);
  const int ce = kEcnCe;
  ASSERT_EQ(setsockopt(queue->fd(), IPPROTO_IP, IP_TOS, &ce, sizeof(ce)), 0);
  // What `a` sends, as a plain socket that reads the TOS sees it.
  const int s = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(port(24));
  const int one = 1;
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(setsockopt(s, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one)), 0);
  std::vector<uint8_t> data(64, 1);
  Packet p = sample(0, data);
  ASSERT_TRUE(a->send(p, UdpAddr{lo(), port(24)}));
  uint8_t buf[2048];
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))];
  iovec iov{buf, sizeof(buf)};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = ctl;
  m.msg_controllen = sizeof(ctl);
  pollfd pf{s, POLLIN, 0};
  ASSERT_EQ(::poll(&pf, 1, 5000), 1);
  ASSERT_GT(recvmsg(s, &m, 0), 0);
  int tos = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) tos = *CMSG_DATA(c);
  close(s);
  EXPECT_EQ(tos & kEcnMask, kEcnEct0) << "sent ECT(0)";
  // Marked on the way, and not.
  ASSERT_TRUE(queue->send(p, b->local()));
  auto got = receive(*b, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].p.ce);
  ASSERT_TRUE(a->send(p, b->local()));
  got = receive(*b, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_FALSE(got[0].p.ce);
  // A CNP reaches whoever polls, counted.
  Packet n = cnp(0x123, 0xffff);
  ASSERT_TRUE(a->send(n, b->local()));
  got = receive(*b, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].p.bth.opcode, kCnpOpcode);
  EXPECT_EQ(got[0].p.bth.dest_qp, 0x123u);
  EXPECT_EQ(b->stats().cnp, 1u);
}

TEST(UdpLink, AWildcardAddressIsRefused) {
  UdpEndpoint::Options o;
  o.bind = UdpAddr{IpAddr::v4(htonl(INADDR_ANY)), port(9)};
  auto e = UdpEndpoint::open(o);
  ASSERT_FALSE(e.is_ok());
  EXPECT_EQ(e.err(), EINVAL);           // the ICRC needs the real source address
  o.bind = UdpAddr{IpAddr{}, port(9)};  // ::
  e = UdpEndpoint::open(o);
  ASSERT_FALSE(e.is_ok());
  EXPECT_EQ(e.err(), EINVAL);
}

void every_corrupted_packet_caught(const IpAddr& at, int k) {
  FaultConfig f;
  f.corrupt = 1.0;
  f.seed = 3;
  auto a = endpoint(k, f, at), b = endpoint(k + 1, {}, at);
  ASSERT_TRUE(a && b);
  std::vector<uint8_t> data(300, 0x5a);
  for (uint32_t i = 0; i < 100; ++i) {
    Packet p = sample(i * 6, data);  // SEND_ONLY, PSN 6i
    ASSERT_TRUE(a->send(p, b->local()));
  }
  auto got = receive(*b, 100, 100);  // until all 100 datagrams were read
  EXPECT_EQ(b->stats().received, 100u);
  // The ICRC does not cover BTH byte 4 (FECN/BECN, Annex A17): a packet
  // corrupted there is accepted, and must otherwise be intact.
  EXPECT_EQ(b->stats().bad_icrc + got.size(), 100u);
  EXPECT_LE(got.size(), 5u);
  for (const Got& g : got) {
    EXPECT_EQ(g.p.bth.opcode, opcode(Service::kRc, kSendOnly));
    EXPECT_EQ(g.p.bth.psn % 6, 0u);
    EXPECT_EQ(g.payload, std::vector<uint8_t>(g.payload.size(), 0x5a));
  }
}

TEST(UdpLink, TheIcrcCatchesEveryCorruptedPacket) { every_corrupted_packet_caught(lo(), 2); }

TEST(UdpLink, TheIcrcCatchesEveryCorruptedPacketOverIpv6) { every_corrupted_packet_caught(lo6(), 22); }

TEST(UdpLink, HeldBackPacketsGoToTheirOwnDestination) {
  FaultConfig f;
  f.reorder = 0.5;
  f.seed = 9;
  auto a = endpoint(4, f), b = endpoint(5), c = endpoint(6);
  ASSERT_TRUE(a && b && c);
  std::vector<uint8_t> data(300, 1);
  for (uint32_t i = 0; i < 200; ++i) {
    Packet p = sample(i * 6, data);  // all SEND_ONLY
    p.bth.dest_qp = i % 2 ? 0xbbb : 0xccc;
    ASSERT_TRUE(a->send(p, i % 2 ? b->local() : c->local()));
  }
  a->flush();
  auto gb = receive(*b, 100), gc = receive(*c, 100);
  ASSERT_EQ(gb.size(), 100u);
  ASSERT_EQ(gc.size(), 100u);
  for (auto& g : gb) EXPECT_EQ(g.p.bth.dest_qp, 0xbbbu);
  for (auto& g : gc) EXPECT_EQ(g.p.bth.dest_qp, 0xcccu);
  EXPECT_GT(a->stats().sent, 0u);
}

/// Captures on lo what the kernel really sends from `from` (port(k_from))
/// to port(k_to), and checks each frame's ICRC over the kernel's own
/// headers, and the capture with the independent checker and tshark.
/// `at`: the address both use (IPv4 or IPv6 loopback).
void live_capture_check(int k_from, int k_to, const IpAddr& at = lo()) {
  if (geteuid() != 0) GTEST_SKIP() << "a live capture needs root";
  char err[PCAP_ERRBUF_SIZE];
  pcap_t* live = pcap_create("lo", err);
  if (!live) GTEST_SKIP() << "no live capture on lo: " << err;
  // Small frames and a large ring: the test reads the capture only after
  // sending everything (a 64 KiB snaplen leaves room for 16 frames in 2 MiB).
  pcap_set_snaplen(live, 4096);
  pcap_set_buffer_size(live, 16 << 20);
  pcap_set_immediate_mode(live, 1);  // frames as they come, not per buffer timeout
  if (pcap_activate(live) < 0) {
    std::string why = pcap_geterr(live);
    pcap_close(live);
    GTEST_SKIP() << "no live capture on lo: " << why;
  }
  const std::string filter = "udp and dst port " + std::to_string(port(k_to));
  bpf_program prog;
  ASSERT_EQ(pcap_compile(live, &prog, filter.c_str(), 1, PCAP_NETMASK_UNKNOWN), 0) << pcap_geterr(live);
  ASSERT_EQ(pcap_setfilter(live, &prog), 0);
  pcap_freecode(&prog);
  ASSERT_EQ(pcap_setnonblock(live, 1, err), 0);

  auto b = endpoint(k_to, {}, at);
  ASSERT_TRUE(b);
  auto a = endpoint(k_from, {}, at);
  ASSERT_TRUE(a);
  std::vector<uint8_t> data(300);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i);
  constexpr uint32_t n = 25;  // 24 of every shape, then a CNP
  for (uint32_t i = 0; i + 1 < n; ++i) {
    Packet p = sample(i, data);
    ASSERT_TRUE(a->send(p, b->local()));
  }
  Packet c = cnp(0x123, 0xffff);
  ASSERT_TRUE(a->send(c, b->local()));
  ASSERT_EQ(receive(*b, n).size(), n);
  EXPECT_FALSE(b->parked());

  const char* tmpdir = getenv("TMPDIR");
  const std::string path =
      std::string(tmpdir ? tmpdir : "/tmp") + "/uroce-udp-live-" + std::to_string(getpid()) + ".pcap";
  auto out = PcapWriter::open(path);
  ASSERT_TRUE(out.is_ok());
  uint32_t frames = 0, icrc_ok = 0, id_zero = 0;
  for (int idle = 0; frames < n && idle < 50;) {
    pcap_pkthdr* h;
    const u_char* d;
    if (pcap_next_ex(live, &h, &d) != 1) {
      usleep(20000);
      ++idle;
      continue;
    }
    const int dl = pcap_datalink(live);
    const size_t off = dl == DLT_EN10MB ? 14 : dl == DLT_NULL ? 4 : 0;
    if (h->caplen < off + 28) continue;
    const uint8_t* ip = d + off;
    const bool v6 = (ip[0] >> 4) == 6;
    if (v6 && h->caplen < off + 48) continue;
    const size_t ihl = v6 ? kIpv6HeaderBytes : size_t(ip[0] & 0xf) * 4;
    const uint8_t* udp = ip + ihl;
    const size_t ulen = size_t(udp[4] << 8 | udp[5]);
    std::span<const uint8_t> ib(udp + 8, ulen - 8);
    ++frames;
    const uint16_t id = uint16_t(ip[4] << 8 | ip[5]);
    id_zero += id == 0;
    icrc_ok += icrc({ip, ihl}, {udp, 8}, ib.first(ib.size() - 4)) == get_icrc(ib.data() + ib.size() - 4);
    // Loopback hands the capture an unfinished UDP checksum (offload); the
    // copy for the checker gets 0, "no checksum" over IPv4, and the real one
    // over IPv6 (which has no "none"). Nothing else is touched, and the ICRC
    // does not cover that field.
    std::vector<uint8_t> hdr(ip, ip + ihl + 8);
    hdr[ihl + 6] = hdr[ihl + 7] = 0;
    if (v6) {
      Ipv6UdpFields u;
      memcpy(u.src, ip + 8, 16);
      memcpy(u.dst, ip + 24, 16);
      u.sport = uint16_t(udp[0] << 8 | udp[1]);
      u.dport = uint16_t(udp[2] << 8 | udp[3]);
      uint8_t ip6[kIpv6HeaderBytes], u8[kUdpHeaderBytes];
      build_ipv6_udp(u, ib.size(), ib.data(), ip6, u8);
      hdr[ihl + 6] = u8[6];
      hdr[ihl + 7] = u8[7];
    }
    out.value()->write(hdr, ib, uint64_t(h->ts.tv_sec) * 1000000000ull, true);
  }
  pcap_close(live);
  out.value().reset();
  EXPECT_EQ(frames, n);
  if (at.is_v4()) {
    EXPECT_EQ(id_zero, frames) << "Linux sent a non-zero IP identification";
  }
  EXPECT_EQ(icrc_ok, frames) << "the ICRC over the kernel's real headers";
  const char* wire_dir = getenv("UROCE_SHARED_WIRE");
  struct stat st;
  if (!wire_dir || stat((std::string(wire_dir) + "/roce_check.py").c_str(), &st) != 0) {
    printf("SKIP step: roce_check.py and tshark_roce.sh on the capture: no %s (../shared absent)\n",
           wire_dir ? wire_dir : "UROCE_SHARED_WIRE");
  } else {
    const std::string cmd = "python3 " + std::string(wire_dir) + "/roce_check.py --quiet --port " +
                            std::to_string(port(k_to)) + " " + path + " | tail -1";
    FILE* f = popen(cmd.c_str(), "r");
    char line[256] = {};
    ASSERT_TRUE(f && fgets(line, sizeof(line), f));
    pclose(f);
    EXPECT_EQ(std::string(line), std::to_string(n) + " passed, 0 failed\n") << cmd;
    // And Wireshark's dissector, when tshark is installed.
    if (stat((std::string(wire_dir) + "/tshark_roce.sh").c_str(), &st) == 0 &&
        system("command -v tshark >/dev/null") == 0) {
      const std::string tcmd = "ROCE_PORT=" + std::to_string(port(k_to)) + " bash " + std::string(wire_dir) +
                               "/tshark_roce.sh " + path + " | tail -1";
      FILE* t = popen(tcmd.c_str(), "r");
      char tline[256] = {};
      ASSERT_TRUE(t && fgets(tline, sizeof(tline), t));
      pclose(t);
      EXPECT_EQ(std::string(tline), std::to_string(n) + " passed, 0 failed\n") << tcmd;
    }
  }
  if (!getenv("UROCE_KEEP_CAPTURE")) unlink(path.c_str());
}

TEST(UdpLink, WhatTheKernelSendsMatchesTheIcrcAndTheChecker) { live_capture_check(7, 8); }

TEST(UdpLink, WhatTheKernelSendsOverIpv6MatchesTheIcrcAndTheChecker) { live_capture_check(24, 25, lo6()); }

}  // namespace
}  // namespace uroce::link
