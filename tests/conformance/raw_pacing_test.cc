// Packet pacing of RAW_PACKET QPs (IBV_QP_RATE_LIMIT at RTR -> RTS or RTS
// -> RTS, ibv_modify_qp_rate_limit(3)), as perftest's raw_ethernet_burst_lat
// --rate_limit_type=PP uses it: the device advertises packet_pacing_caps,
// frames leave no faster than the rate (a lower bound on the time a
// sequence takes: load only makes it longer), in order and whole, and
// what still waits when the QP fails completes with WR_FLUSH_ERR.
#include <chrono>

#include "raw_fixture.h"

namespace uroce::fault {
namespace {

using namespace raw;

TEST_F(RawEthernet, TheDeviceOffersPacingOnRawQps) {
  ibv_device_attr_ex ex{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &ex), 0);
  // perftest's check: packet pacing exists when qp_rate_limit_max > 0.
  EXPECT_GT(ex.packet_pacing_caps.qp_rate_limit_max, 0u);
  EXPECT_LE(ex.packet_pacing_caps.qp_rate_limit_min, ex.packet_pacing_caps.qp_rate_limit_max);
  EXPECT_TRUE(ex.packet_pacing_caps.supported_qpts & (1u << IBV_QPT_RAW_PACKET));
}

TEST_F(RawEthernet, PacedFramesLeaveNoFasterThanTheRateInOrder) {
  ASSERT_TRUE(srv_->make(ctx_, pd_));
  ASSERT_TRUE(cli_->make(ctx_, pd_, 1000));  // 1 Mbit/s: a 125-byte frame per ms
  Rule r;
  r.dst_mac(kSrvMac).udp_dport(5001);
  ibv_flow* f = ibv_create_flow(srv_->qp, r.attr());
  ASSERT_NE(f, nullptr) << strerror(errno);
  constexpr int kFrames = 11;
  for (int i = 0; i < kFrames; ++i) ASSERT_EQ(srv_->recv(100 + i, size_t(i) * 2048), 0);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kFrames; ++i) {
    auto frame = udp_frame(kSrvMac, kCliMac, 4000, 5001, 125);
    frame[42] = uint8_t(i);
    ASSERT_EQ(cli_->send(uint64_t(i), frame, 32 * 1024 + size_t(i) * 256), 0);
  }
  const auto sent = poll_n(cli_->cq, kFrames);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(sent.size(), size_t(kFrames));
  for (int i = 0; i < kFrames; ++i) {
    EXPECT_EQ(sent[size_t(i)].status, IBV_WC_SUCCESS);
    EXPECT_EQ(sent[size_t(i)].wr_id, uint64_t(i)) << "in the order posted";
  }
  // The first leaves at once, each of the other ten 1 ms after the one before.
  EXPECT_GE(took, std::chrono::milliseconds(10)) << "faster than 1 Mbit/s";
  const auto got = poll_n(srv_->cq, kFrames);
  ASSERT_EQ(got.size(), size_t(kFrames));
  for (int i = 0; i < kFrames; ++i) {
    EXPECT_EQ(got[size_t(i)].byte_len, 125u);
    EXPECT_EQ(srv_->buf[size_t(i) * 2048 + 42], uint8_t(i)) << "whole, in order";
  }
  // Unpaced again (RTS -> RTS, rate 0): what comes leaves at once.
  ibv_qp_attr m{};
  m.qp_state = IBV_QPS_RTS;
  m.rate_limit = 0;
  ASSERT_EQ(ibv_modify_qp(cli_->qp, &m, IBV_QP_STATE | IBV_QP_RATE_LIMIT), 0);
  ASSERT_EQ(cli_->send(50, udp_frame(kCliMac, kSrvMac, 1, 2, 64)), 0);
  auto wc = poll_one(cli_->cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  EXPECT_EQ(ibv_destroy_flow(f), 0);
}

TEST_F(RawEthernet, WhatWaitsForThePaceIsFlushedWhenTheQpFails) {
  ASSERT_TRUE(cli_->make(ctx_, pd_));
  // ibv_modify_qp_rate_limit(3): 1 kbit/s, the device's least; a 125-byte
  // frame then takes a second.
  ibv_qp_rate_limit_attr rl{};
  rl.rate_limit = 1;
  ASSERT_EQ(ibv_modify_qp_rate_limit(cli_->qp, &rl), 0);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(cli_->send(uint64_t(i), udp_frame(kCliMac, kSrvMac, 1, 2, 125), 32 * 1024 + size_t(i) * 256),
              0);
  auto first = poll_one(cli_->cq);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->wr_id, 0u);
  EXPECT_EQ(first->status, IBV_WC_SUCCESS) << "the first leaves at once";
  ibv_qp_attr m{};
  m.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(cli_->qp, &m, IBV_QP_STATE), 0);
  const auto rest = poll_n(cli_->cq, 2);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].wr_id, 1u);
  EXPECT_EQ(rest[1].wr_id, 2u);
  for (const ibv_wc& wc : rest) EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
  // Posted in ERR: flushed at once too.
  ASSERT_EQ(cli_->send(3, udp_frame(kCliMac, kSrvMac, 1, 2, 125)), 0);
  auto late = poll_one(cli_->cq);
  ASSERT_TRUE(late);
  EXPECT_EQ(late->status, IBV_WC_WR_FLUSH_ERR);
}

TEST_F(RawEthernet, ARateOutsideTheCapsOrOnTheWrongTransitionIsEinval) {
  ibv_device_attr_ex ex{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &ex), 0);
  ASSERT_TRUE(cli_->make(ctx_, pd_));
  ibv_qp_attr m{};
  m.qp_state = IBV_QPS_RTS;
  m.rate_limit = ex.packet_pacing_caps.qp_rate_limit_max + 1;
  EXPECT_EQ(ibv_modify_qp(cli_->qp, &m, IBV_QP_STATE | IBV_QP_RATE_LIMIT), EINVAL);
  // The rate goes with RTR -> RTS or RTS -> RTS only (the kernel's table).
  ibv_qp_init_attr a{};
  a.send_cq = a.recv_cq = cli_->cq;
  a.qp_type = IBV_QPT_RAW_PACKET;
  a.cap = {4, 4, 1, 1, 0};
  ibv_qp* q = ibv_create_qp(pd_, &a);
  ASSERT_NE(q, nullptr);
  m = {};
  m.qp_state = IBV_QPS_INIT;
  m.port_num = 1;
  m.rate_limit = 1000;
  EXPECT_EQ(ibv_modify_qp(q, &m, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_RATE_LIMIT), EINVAL);
  EXPECT_EQ(ibv_destroy_qp(q), 0);
  // ibv_modify_qp_rate_limit on a QP that is not raw.
  ibv_cq* cq = ibv_create_cq(ctx_, 4, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  a.qp_type = IBV_QPT_RC;
  a.send_cq = a.recv_cq = cq;
  q = ibv_create_qp(pd_, &a);
  ASSERT_NE(q, nullptr);
  ibv_qp_rate_limit_attr rl{};
  rl.rate_limit = 1000;
  EXPECT_EQ(ibv_modify_qp_rate_limit(q, &rl), EINVAL);
  EXPECT_EQ(ibv_destroy_qp(q), 0);
  ibv_destroy_cq(cq);
}

}  // namespace
}  // namespace uroce::fault
