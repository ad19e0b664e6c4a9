// The UD receive side on a packet link: Q_Key check, no receive = silent
// loss, GRH then payload in the buffer, source QP and immediate reported,
// too long = length error (IBA 9.7.5, 10.2.5, 11.4.1.2).
#include "transport/ud_responder.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "protocol/fake_receives.h"
#include "wire/ip_udp.h"

namespace uroce::transport {
namespace {

using namespace uroce::wire;

struct Env : FakeReceives {
  int errors = 0;
  uint8_t* remote_memory(uint32_t, uint64_t, uint64_t, uint32_t) override { return nullptr; }
  uint64_t atomic(uint8_t*, bool, uint64_t, uint64_t) override { return 0; }
  void send(Packet&) override { ADD_FAILURE() << "UD answers nothing"; }
  void qp_error(transport::AsyncEvent) override { ++errors; }
};

TEST(UdResponder, DeliversBehindTheGrhAndDropsWhatItMust) {
  Env env;
  UdResponder ud(0x11111111, &env);
  uint8_t ip[20], udp[8];
  Ipv4UdpFields f;
  f.src = htonl(0x0a000001);
  f.dst = htonl(0x0a000002);
  build_ipv4_udp(f, 100, nullptr, ip, udp);
  uint8_t grh[kGrhBytes];
  grh_from_ipv4(ip, grh);
  EXPECT_EQ(grh[0] | grh[19], 0);
  EXPECT_EQ(grh[20], 0x45);

  const uint8_t payload[5] = {1, 2, 3, 4, 5};
  Packet p;
  p.bth.opcode = opcode(Service::kUd, kSendOnlyImm);
  p.qkey = 0x11111111;
  p.src_qp = 0x1234;
  p.imm = htonl(7);
  p.payload = payload;

  ud.on_request(p, grh);  // nothing posted: lost, silently
  EXPECT_EQ(ud.stats().no_recv, 1u);
  env.posted.emplace_back(100);
  Packet wrong = p;
  wrong.qkey = 0x22222222;
  ud.on_request(wrong, grh);
  EXPECT_EQ(ud.stats().bad_qkey, 1u);
  EXPECT_EQ(env.posted.size(), 1u) << "a dropped packet consumes no receive";
  ud.on_request(p, grh);
  ASSERT_EQ(env.done.size(), 1u);
  EXPECT_EQ(env.done[0].st, transport::WcStatus::kSuccess);
  EXPECT_EQ(env.done[0].len, kGrhBytes + 5);
  EXPECT_EQ(memcmp(env.done[0].data.data(), grh, kGrhBytes), 0);
  EXPECT_EQ(memcmp(env.done[0].data.data() + kGrhBytes, payload, 5), 0);
  EXPECT_TRUE(env.done[0].info.with_grh && env.done[0].info.has_imm);
  EXPECT_EQ(env.done[0].info.src_qp, 0x1234u);
  EXPECT_EQ(env.done[0].info.imm, htonl(7));
  // Expect: wc.sl is mlx5's packet type, RoCE v2 over IPv4 (UCX finds the
  // destination GID in the GRH by it).
  EXPECT_EQ(env.done[0].info.sl, 0xA);

  env.posted.emplace_back(kGrhBytes + 2);  // room for 2 payload bytes only
  ud.on_request(p, grh);
  EXPECT_EQ(env.done.back().st, transport::WcStatus::kLocLenErr);
  EXPECT_EQ(env.errors, 1);

  // Over IPv6 the GRH is the IPv6 header: packet type RoCE v2 over IPv6.
  uint8_t sgid[16] = {0xfd, 0x77}, dgid[16] = {0xfd, 0x77};
  dgid[15] = 2;
  grh_ipv6(0, 0, uint16_t(kUdpHeaderBytes + 100), 64, sgid, dgid, grh);
  env.posted.emplace_back(100);
  ud.on_request(p, grh);
  EXPECT_EQ(env.done.back().st, transport::WcStatus::kSuccess);
  EXPECT_EQ(env.done.back().info.sl, 0x9);

  Packet rc = p;
  rc.bth.opcode = opcode(Service::kRc, kSendOnly);
  ud.on_request(rc, grh);
  EXPECT_EQ(ud.stats().not_ud, 1u);
}

}  // namespace
}  // namespace uroce::transport
