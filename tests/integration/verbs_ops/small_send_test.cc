// Small SENDs between processes of one host go as one record in the
// receiver's ring (core/eager.h); larger ones, WRITE with immediate and
// anything the ring cannot vouch for take the usual delivery. These tests
// mix the two on one QP and check what a program sees: receives consumed
// and completed in message order with their bytes, RNR while none is
// posted, the errors an HCA reports (a receive too short: both sides), a
// QP reset dropping what was not polled.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "support/verbs_harness.h"

namespace uroce::test {
namespace {

ibv_send_wr send_wr(uint64_t id, ibv_wr_opcode op, ibv_sge* sg, uint32_t imm = 0) {
  ibv_send_wr w;
  memset(&w, 0, sizeof(w));
  w.wr_id = id;
  w.opcode = op;
  w.sg_list = sg;
  w.num_sge = sg->length ? 1 : 0;
  w.send_flags = IBV_SEND_SIGNALED;
  w.imm_data = imm;
  return w;
}

// The receiver in another process (the Agent).
class SmallSendTest : public ::testing::Test {
 protected:
  void start(const EndConfig& agent_cfg) {
    EndConfig cfg;
    cfg.bg_seed = 7;
    std::string err;
    ASSERT_TRUE(local_.open(cfg, &err)) << err;
    agent_ = Agent::start(agent_cfg, &err);
    ASSERT_TRUE(agent_) << err;
    ASSERT_TRUE(agent_->connect(local_.info())) << agent_->error();
    ASSERT_TRUE(local_.connect(agent_->info(), &err)) << err;
  }
  void post_ok(ibv_send_wr w) {
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(local_.qp.get(), &w, &bad), 0);
    auto wc = poll_one(local_.scq.get());
    ASSERT_TRUE(wc) << "no send completion for wr_id " << w.wr_id;
    ASSERT_EQ(wc->status, IBV_WC_SUCCESS) << wc_str(*wc);
    ASSERT_EQ(wc->wr_id, w.wr_id);
  }
  LocalEnd local_;
  std::unique_ptr<Agent> agent_;
};

// SENDs of 0..48 bytes (a record), 49 and 3000 bytes (the usual delivery),
// SEND with immediate and WRITE with immediate, interleaved on one QP: the
// receives complete in the order the messages were sent, each with its own
// bytes in its own buffer.
TEST_F(SmallSendTest, MixedSizesAndOpcodesKeepTheirOrder) {
  EndConfig acfg;
  acfg.bg_seed = 9;
  ASSERT_NO_FATAL_FAILURE(start(acfg));
  constexpr int kN = 60;
  constexpr uint32_t kSizes[] = {2, 48, 49, 0, 3000, 1, 33};
  constexpr uint64_t kSlot = 8192, kTarget = 1u << 20;
  for (int i = 0; i < kN; ++i) ASSERT_EQ(agent_->post_recv(100 + i, {{i * kSlot, uint32_t(kSlot)}}), 0);
  for (int i = 0; i < kN; ++i) {
    const uint32_t len = kSizes[i % 7];
    local_.mem.fill(i * kSlot, len, 1000 + i);
    ibv_sge sg = local_.sge(i * kSlot, len);
    if (i % 5 == 3) {
      ibv_send_wr w = send_wr(i, IBV_WR_RDMA_WRITE_WITH_IMM, &sg, htonl(0x5000 + i));
      w.wr.rdma.remote_addr = agent_->info().addr + kTarget + i * kSlot;
      w.wr.rdma.rkey = agent_->info().rkey;
      ASSERT_NO_FATAL_FAILURE(post_ok(w));
    } else {
      ASSERT_NO_FATAL_FAILURE(
          post_ok(send_wr(i, i % 5 == 1 ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, &sg, htonl(0x7000 + i))));
    }
  }
  for (int i = 0; i < kN; ++i) {
    const uint32_t len = kSizes[i % 7];
    ibv_wc wc;
    ASSERT_EQ(agent_->poll_recv(&wc), 1) << "receive " << i << ": " << agent_->error();
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
    EXPECT_EQ(wc.wr_id, uint64_t(100 + i)) << wc_str(wc);
    EXPECT_EQ(wc.byte_len, len) << wc_str(wc);
    EXPECT_EQ(wc.qp_num, agent_->info().qpn);
    if (i % 5 == 3) {
      EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM) << wc_str(wc);
      EXPECT_EQ(ntohl(wc.imm_data), uint32_t(0x5000 + i));
      EXPECT_TRUE(agent_->expect(kTarget + i * kSlot, len, 1000 + i)) << agent_->error();
    } else {
      EXPECT_EQ(wc.opcode, IBV_WC_RECV) << wc_str(wc);
      EXPECT_EQ(!!(wc.wc_flags & IBV_WC_WITH_IMM), i % 5 == 1) << wc_str(wc);
      if (i % 5 == 1) EXPECT_EQ(ntohl(wc.imm_data), uint32_t(0x7000 + i));
      EXPECT_TRUE(agent_->expect(i * kSlot, len, 1000 + i)) << agent_->error();
    }
  }
  EXPECT_EQ(agent_->verify(), "");
}

// More small SENDs than the ring holds, none polled until all are sent: the
// ones that find it full take the usual delivery, and the receiver still
// sees every message in order.
TEST_F(SmallSendTest, MoreThanTheRingHoldsBeforeAnyPoll) {
  EndConfig acfg;
  acfg.bg_seed = 9;
  acfg.caps.max_recv_wr = 512;
  acfg.cqe = 1024;
  ASSERT_NO_FATAL_FAILURE(start(acfg));
  constexpr int kN = 400;
  for (int i = 0; i < kN; ++i) ASSERT_EQ(agent_->post_recv(i, {{uint64_t(i) * 64, 64}}), 0);
  for (int i = 0; i < kN; ++i) {
    const uint32_t len = 1 + i % 48;
    local_.mem.fill(uint64_t(i) * 64, len, 3000 + i);
    ibv_sge sg = local_.sge(uint64_t(i) * 64, len);
    ASSERT_NO_FATAL_FAILURE(post_ok(send_wr(i, IBV_WR_SEND, &sg)));
  }
  for (int i = 0; i < kN; ++i) {
    ibv_wc wc;
    ASSERT_EQ(agent_->poll_recv(&wc), 1) << "receive " << i << ": " << agent_->error();
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
    ASSERT_EQ(wc.wr_id, uint64_t(i)) << wc_str(wc);
    ASSERT_EQ(wc.byte_len, uint32_t(1 + i % 48));
    ASSERT_TRUE(agent_->expect(uint64_t(i) * 64, 1 + i % 48, 3000 + i)) << agent_->error();
  }
  EXPECT_EQ(agent_->verify(), "");
}

// Both ends in this process, so the receiver's every step is in the test's hands.
class SmallSendLocalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EndConfig cfg;
    std::string err;
    cfg.bg_seed = 3;
    ASSERT_TRUE(a_.open(cfg, &err)) << err;
    cfg.bg_seed = 4;
    ASSERT_TRUE(b_.open(cfg, &err)) << err;
    ASSERT_TRUE(a_.connect(b_.info(), &err)) << err;
    ASSERT_TRUE(b_.connect(a_.info(), &err)) << err;
  }
  ibv_wc send(uint64_t id, uint64_t off, uint32_t len, uint32_t seed) {
    a_.mem.fill(off, len, seed);
    ibv_sge sg = a_.sge(off, len);
    ibv_send_wr w = send_wr(id, IBV_WR_SEND, &sg);
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(a_.qp.get(), &w, &bad), 0);
    auto wc = poll_one(a_.scq.get());
    EXPECT_TRUE(wc) << "no send completion for wr_id " << id;
    return wc ? *wc : ibv_wc{};
  }
  LocalEnd a_, b_;
};

// A receive shorter than the message, posted behind longer ones: the
// earlier small SENDs arrive; the one that does not fit fails on both
// sides as on an HCA (receiver: local length error; sender: remote
// invalid request).
TEST_F(SmallSendLocalTest, AShortReceiveFailsOnBothSides) {
  ASSERT_EQ(b_.post_recv(1, {b_.sge(0, 4096)}), 0);
  ASSERT_EQ(b_.post_recv(2, {b_.sge(4096, 4096)}), 0);
  ASSERT_EQ(b_.post_recv(3, {b_.sge(8192, 4)}), 0);
  EXPECT_EQ(send(11, 0, 2, 50).status, IBV_WC_SUCCESS);
  EXPECT_EQ(send(12, 64, 3, 51).status, IBV_WC_SUCCESS);
  ibv_wc s = send(13, 128, 8, 52);
  EXPECT_EQ(s.status, IBV_WC_REM_INV_REQ_ERR) << wc_str(s);
  auto got = poll_n(b_.rcq.get(), 3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].wr_id, 1u);
  EXPECT_EQ(got[0].status, IBV_WC_SUCCESS) << wc_str(got[0]);
  EXPECT_EQ(got[1].wr_id, 2u);
  EXPECT_EQ(got[1].status, IBV_WC_SUCCESS) << wc_str(got[1]);
  EXPECT_EQ(got[2].wr_id, 3u);
  EXPECT_EQ(got[2].status, IBV_WC_LOC_LEN_ERR) << wc_str(got[2]);
  b_.mem.expect(0, 2, 50);
  b_.mem.expect(4096, 3, 51);
  b_.mem.accept(8192, 4);
  EXPECT_EQ(b_.mem.verify(), "");
}

// No receive posted: the SEND waits (RNR, retried forever with rnr_retry 7)
// and lands in the receive posted later, bytes and all.
TEST_F(SmallSendLocalTest, ASendWithoutAReceiveWaitsForOne) {
  a_.mem.fill(0, 5, 60);
  ibv_sge sg = a_.sge(0, 5);
  ibv_send_wr w = send_wr(21, IBV_WR_SEND, &sg);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a_.qp.get(), &w, &bad), 0);
  EXPECT_TRUE(drain_cq(b_.rcq.get(), 50).empty());
  EXPECT_TRUE(drain_cq(a_.scq.get(), 0).empty());
  ASSERT_EQ(b_.post_recv(5, {b_.sge(512, 64)}), 0);
  auto r = poll_one(b_.rcq.get());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, IBV_WC_SUCCESS) << wc_str(*r);
  EXPECT_EQ(r->wr_id, 5u);
  EXPECT_EQ(r->byte_len, 5u);
  auto s = poll_one(a_.scq.get());
  ASSERT_TRUE(s);
  EXPECT_EQ(s->status, IBV_WC_SUCCESS) << wc_str(*s);
  b_.mem.expect(512, 5, 60);
  EXPECT_EQ(b_.mem.verify(), "");
}

// The receiver moves its QP to RESET without polling: the messages it had
// not polled go with the receives they were for; after reconnecting, the
// next SEND lands in the next receive.
TEST_F(SmallSendLocalTest, ResetDropsWhatWasNotPolled) {
  for (int i = 0; i < 3; ++i) ASSERT_EQ(b_.post_recv(30 + i, {b_.sge(i * 64, 64)}), 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(send(40 + i, i * 64, 8, 70 + i).status, IBV_WC_SUCCESS);
  ibv_qp_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(ibv_modify_qp(b_.qp.get(), &attr, IBV_QP_STATE), 0);
  std::string err;
  ASSERT_TRUE(b_.connect(a_.info(), &err)) << err;
  EXPECT_TRUE(drain_cq(b_.rcq.get(), 20).empty());
  ASSERT_EQ(b_.post_recv(99, {b_.sge(1024, 64)}), 0);
  EXPECT_EQ(send(49, 512, 6, 80).status, IBV_WC_SUCCESS);
  auto got = drain_cq(b_.rcq.get(), 50);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].wr_id, 99u);
  EXPECT_EQ(got[0].status, IBV_WC_SUCCESS) << wc_str(got[0]);
  EXPECT_EQ(got[0].byte_len, 6u);
  b_.mem.accept(0, 3 * 64);  // written before the reset (an HCA may have placed them too)
  b_.mem.expect(1024, 6, 80);
  EXPECT_EQ(b_.mem.verify(), "");
}

// The receive's region is deregistered after the receive was posted and
// before the message is polled. The receiver's completion is a local
// protection error and its QP goes to ERR, as on an HCA; the sender's
// SEND has completed already (an HCA's sender would see a NAK): the one
// difference docs/intra-host-link.md states.
TEST_F(SmallSendLocalTest, ARegionGoneBeforeThePollFailsTheReceive) {
  ShadowedMemory extra;
  ASSERT_TRUE(extra.allocate(4096));
  MrPtr mr(ibv_reg_mr(b_.dev.pd.get(), extra.data(), 4096, IBV_ACCESS_LOCAL_WRITE));
  ASSERT_TRUE(mr);
  ibv_sge sg{extra.addr(), 64, mr->lkey};
  ASSERT_EQ(b_.post_recv(7, {sg}), 0);
  mr.reset();
  const bool eager = !getenv("UROCE_EAGER") || strcmp(getenv("UROCE_EAGER"), "0") != 0;
  ibv_wc s = send(8, 0, 4, 90);
  EXPECT_EQ(s.status, eager ? IBV_WC_SUCCESS : IBV_WC_REM_OP_ERR) << wc_str(s);
  auto r = poll_one(b_.rcq.get());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->wr_id, 7u);
  EXPECT_EQ(r->status, IBV_WC_LOC_PROT_ERR) << wc_str(*r);
  ibv_qp_attr attr;
  ibv_qp_init_attr init;
  ASSERT_EQ(ibv_query_qp(b_.qp.get(), &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_ERR);
}

// One CQ for a QP's sends and receives, polled one completion at a time
// until the peer's reply shows up (rping's CQ thread): the QP's own send
// completions must come out too, or its send queue fills (ENOMEM) although
// every send has completed.
TEST(SmallSendOneCqTest, RepliesDoNotStarveSendCompletions) {
  LocalEnd a, b;
  EndConfig cfg;
  cfg.caps.max_send_wr = 16;
  std::string err;
  ASSERT_TRUE(a.open(cfg, &err)) << err;
  ASSERT_TRUE(b.open(cfg, &err)) << err;
  a.qp.reset(create_qp(a.dev.pd.get(), IBV_QPT_RC, a.scq.get(), a.scq.get(), nullptr, cfg.caps));
  ASSERT_TRUE(a.qp);
  ASSERT_TRUE(a.connect(b.info(), &err)) << err;
  ASSERT_TRUE(b.connect(a.info(), &err)) << err;
  int sends_seen = 0;
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(a.post_recv(i, {a.sge(4096, 64)}), 0);
    ASSERT_EQ(b.post_recv(i, {b.sge(4096, 64)}), 0);
    ibv_sge sg = a.sge(0, 2);
    ibv_send_wr w = send_wr(i, IBV_WR_SEND, &sg);
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(a.qp.get(), &w, &bad), 0) << "ping " << i << ": send queue full";
    auto r = poll_one(b.rcq.get());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, IBV_WC_SUCCESS) << wc_str(*r);
    ibv_sge bsg = b.sge(0, 2);
    ibv_send_wr bw = send_wr(i, IBV_WR_SEND, &bsg);
    ASSERT_EQ(ibv_post_send(b.qp.get(), &bw, &bad), 0);
    auto bs = poll_one(b.scq.get());
    ASSERT_TRUE(bs);
    bool reply = false;
    for (int tries = 0; !reply && tries < 1000000; ++tries) {
      ibv_wc wc;
      const int k = ibv_poll_cq(a.scq.get(), 1, &wc);
      ASSERT_GE(k, 0);
      if (k == 0) continue;
      ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
      if (wc.opcode == IBV_WC_RECV)
        reply = true;
      else
        ++sends_seen;
    }
    ASSERT_TRUE(reply) << "no reply to ping " << i;
  }
  sends_seen += int(drain_cq(a.scq.get(), 20).size());
  EXPECT_EQ(sends_seen, 100);
}

}  // namespace
}  // namespace uroce::test
