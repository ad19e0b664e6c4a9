// Case 4: a SEND that finds no posted receive is RNR NAKed and retried after
// the responder's min_rnr_timer. With rnr_retry 0..6 the budget runs out and
// the WR completes with IBV_WC_RNR_RETRY_EXC_ERR (bounded wait); with
// rnr_retry 7 ("infinite") it completes successfully once the receiver posts
// a receive later, and nothing is lost or reordered meanwhile.
//
// Rules: IBA vol. 1 9.7.5.2.8 (RNR NAK carrying the responder's RNR timer;
// the requester retries up to its RNR retry count, 7 = retry forever);
// ibv_modify_qp(3) min_rnr_timer (receiving QP) and rnr_retry (sending QP);
// ibv_poll_cq(3) IBV_WC_RNR_RETRY_EXC_ERR.
#include <arpa/inet.h>
#include <unistd.h>

#include <cstring>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

class RnrBudget : public VerbsTest, public ::testing::WithParamInterface<int> {
 protected:
  RcPair p_;
};

TEST_P(RnrBudget, ExhaustedGivesRnrRetryExcErr) {
  RcParams pa, pb;
  pa.rnr_retry = uint8_t(GetParam());
  pb.min_rnr_timer = 1;  // 0.01 ms: the whole budget is spent in well under a second
  ASSERT_TRUE(make_rc_pair(ctx_, &p_, {}, pa, pb));
  memset(p_.a.at(0), 0x5e, 64);
  ibv_sge s = p_.a.sge(0, 64);
  ASSERT_EQ(post_send(p_.a.qp, 1, IBV_WR_SEND, &s, 1), 0);

  auto wc = poll_one(p_.a.send_cq);
  ASSERT_TRUE(wc) << "no completion within " << kWaitMs << " ms";
  EXPECT_EQ(wc->wr_id, 1u);
  EXPECT_EQ(wc->status, IBV_WC_RNR_RETRY_EXC_ERR) << ibv_wc_status_str(wc->status);
  EXPECT_EQ(query_state(p_.a.qp), IBV_QPS_ERR);

  // The failed SEND must not be delivered late: a receive posted now stays empty.
  ibv_sge r = p_.b.sge(0, 256);
  ASSERT_EQ(post_recv(p_.b.qp, 9, &r, 1), 0);
  EXPECT_TRUE(poll_for(p_.b.recv_cq, 30).empty());
  EXPECT_EQ(p_.b.buf[0], 0);
  // Work posted after the error is flushed.
  ASSERT_EQ(post_send(p_.a.qp, 2, IBV_WR_SEND, &s, 1), 0);
  auto fl = poll_one(p_.a.send_cq);
  ASSERT_TRUE(fl);
  EXPECT_EQ(fl->wr_id, 2u);
  EXPECT_EQ(fl->status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(fl->status);
}

TEST_P(RnrBudget, WriteWithImmNeedsAReceiveToo) {
  // RDMA WRITE with immediate consumes a receive WQE (IBA 9.4.4): RNR as a SEND.
  RcParams pa, pb;
  pa.rnr_retry = uint8_t(GetParam());
  ASSERT_TRUE(make_rc_pair(ctx_, &p_, {}, pa, pb));
  ibv_sge s = p_.a.sge(0, 64);
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(7);
  wr.wr.rdma.remote_addr = p_.b.addr(4096);
  wr.wr.rdma.rkey = p_.b.mr->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(p_.a.qp, &wr, &bad), 0);
  auto wc = poll_one(p_.a.send_cq);
  ASSERT_TRUE(wc) << "no completion within " << kWaitMs << " ms";
  EXPECT_EQ(wc->status, IBV_WC_RNR_RETRY_EXC_ERR) << ibv_wc_status_str(wc->status);
  EXPECT_EQ(query_state(p_.a.qp), IBV_QPS_ERR);
}

INSTANTIATE_TEST_SUITE_P(RnrRetry0To6, RnrBudget, ::testing::Range(0, 7),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "rnr_retry_" + std::to_string(i.param);
                         });

class RnrInfinite : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    RcParams pa, pb;
    pa.rnr_retry = 7;
    pb.min_rnr_timer = 1;
    ASSERT_TRUE(make_rc_pair(ctx_, &p_, {}, pa, pb));
  }
  RcPair p_;
};

TEST_F(RnrInfinite, SendCompletesOnceAReceiveIsPosted) {
  for (int i = 0; i < 128; ++i) p_.a.buf[i] = uint8_t(i * 3 + 1);
  ibv_sge s = p_.a.sge(0, 128);
  ASSERT_EQ(post_send(p_.a.qp, 1, IBV_WR_SEND, &s, 1), 0);
  // It cannot complete without a receive (and 7 means never give up).
  EXPECT_TRUE(poll_for(p_.a.send_cq, 30).empty());
  usleep(20000);
  ibv_sge r = p_.b.sge(0, 4096);
  ASSERT_EQ(post_recv(p_.b.qp, 5, &r, 1), 0);

  auto rc = poll_one(p_.b.recv_cq);
  ASSERT_TRUE(rc) << "no receive completion within " << kWaitMs << " ms";
  EXPECT_EQ(rc->wr_id, 5u);
  EXPECT_EQ(rc->status, IBV_WC_SUCCESS) << ibv_wc_status_str(rc->status);
  EXPECT_EQ(rc->byte_len, 128u);
  EXPECT_EQ(memcmp(p_.a.at(0), p_.b.at(0), 128), 0);
  auto sc = poll_one(p_.a.send_cq);
  ASSERT_TRUE(sc) << "no send completion within " << kWaitMs << " ms";
  EXPECT_EQ(sc->wr_id, 1u);
  EXPECT_EQ(sc->status, IBV_WC_SUCCESS) << ibv_wc_status_str(sc->status);
  EXPECT_EQ(query_state(p_.a.qp), IBV_QPS_RTS);
  EXPECT_TRUE(poll_for(p_.b.recv_cq, 10).empty()) << "delivered twice";
}

TEST_F(RnrInfinite, QueuedSendsArriveInOrderWhenReceivesComeLater) {
  // IBA 9.5: the send queue executes in order; WRs behind the one waiting
  // for RNR wait too, and none is lost or duplicated.
  constexpr int kN = 5;
  for (int i = 0; i < kN; ++i) {
    memset(p_.a.at(size_t(i) * 64), 0x10 + i, 64);
    ibv_sge s = p_.a.sge(size_t(i) * 64, 64);
    ASSERT_EQ(post_send(p_.a.qp, 100 + i, IBV_WR_SEND, &s, 1), 0);
  }
  EXPECT_TRUE(poll_for(p_.a.send_cq, 20).empty());
  // Receives trickle in, one every few ms.
  for (int i = 0; i < kN; ++i) {
    usleep(3000);
    ibv_sge r = p_.b.sge(size_t(i) * 256, 256);
    ASSERT_EQ(post_recv(p_.b.qp, 200 + i, &r, 1), 0);
  }
  auto rcv = poll_n(p_.b.recv_cq, kN);
  ASSERT_EQ(rcv.size(), size_t(kN));
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(rcv[i].status, IBV_WC_SUCCESS) << ibv_wc_status_str(rcv[i].status);
    EXPECT_EQ(rcv[i].wr_id, uint64_t(200 + i));
    EXPECT_EQ(p_.b.buf[size_t(i) * 256], 0x10 + i) << "message " << i << " landed out of order";
  }
  auto snd = poll_n(p_.a.send_cq, kN);
  ASSERT_EQ(snd.size(), size_t(kN));
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(snd[i].status, IBV_WC_SUCCESS) << ibv_wc_status_str(snd[i].status);
    EXPECT_EQ(snd[i].wr_id, uint64_t(100 + i));
  }
  EXPECT_TRUE(poll_for(p_.b.recv_cq, 10).empty());
}

}  // namespace
}  // namespace uroce::fault
