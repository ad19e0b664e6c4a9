// Case 3: a SEND longer than the receive buffer posted for it completes with
// IBV_WC_LOC_LEN_ERR at the receiver and IBV_WC_REM_INV_REQ_ERR at the
// sender; both QPs end in ERR and nothing else is lost or duplicated.
//
// Rules: IBA vol. 1 9.9.3.1.2.1 (message longer than the receive WQE's
// buffers: the responder completes the WQE with a local length error and
// NAKs with Invalid Request), 9.7.5.2 (Invalid Request NAK -> requester
// completes in error); ibv_poll_cq(3) IBV_WC_LOC_LEN_ERR ("a Work Request
// that was posted in a local Receive Queue isn't big enough for holding the
// incoming message") and IBV_WC_REM_INV_REQ_ERR.
#include <arpa/inet.h>

#include <cstring>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

class Length : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    ASSERT_TRUE(make_rc_pair(ctx_, &p_));
  }

  /// Receive of `recv_len` bytes (over `nsge` SGEs), SEND of `send_len`.
  void expect_len_err(uint32_t recv_len, uint32_t send_len, int nsge = 1, ibv_wr_opcode op = IBV_WR_SEND) {
    memset(p_.b.at(0), 0x77, 8192);
    ibv_sge r[4];
    uint32_t each = recv_len / uint32_t(nsge);
    for (int i = 0; i < nsge; ++i) r[i] = p_.b.sge(size_t(i) * 1024, each);
    ASSERT_EQ(post_recv(p_.b.qp, 10, r, nsge), 0);
    memset(p_.a.at(0), 0x42, send_len);
    ibv_sge s = p_.a.sge(0, send_len);
    ibv_send_wr wr{};
    wr.wr_id = 20;
    wr.opcode = op;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(0x1234);
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(p_.a.qp, &wr, &bad), 0);

    auto rc = poll_one(p_.b.recv_cq);
    ASSERT_TRUE(rc) << "no receive completion within " << kWaitMs << " ms";
    EXPECT_EQ(rc->wr_id, 10u);
    EXPECT_EQ(rc->status, IBV_WC_LOC_LEN_ERR) << ibv_wc_status_str(rc->status);
    EXPECT_EQ(rc->qp_num, p_.b.qp->qp_num);

    auto sc = poll_one(p_.a.send_cq);
    ASSERT_TRUE(sc) << "no send completion within " << kWaitMs << " ms";
    EXPECT_EQ(sc->wr_id, 20u);
    EXPECT_EQ(sc->status, IBV_WC_REM_INV_REQ_ERR) << ibv_wc_status_str(sc->status);

    // No second completion for the same WR on either side.
    EXPECT_TRUE(poll_for(p_.b.recv_cq, 10).empty());
    EXPECT_TRUE(poll_for(p_.a.send_cq, 10).empty());
    // The requester moved to ERR (IBA 10.3.1) and flushes what follows.
    EXPECT_EQ(query_state(p_.a.qp), IBV_QPS_ERR);
    ibv_sge ok = p_.a.sge(0, 8);
    ASSERT_EQ(post_send(p_.a.qp, 21, IBV_WR_SEND, &ok, 1), 0);
    auto fl = poll_one(p_.a.send_cq);
    ASSERT_TRUE(fl);
    EXPECT_EQ(fl->wr_id, 21u);
    EXPECT_EQ(fl->status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(fl->status);
  }

  RcPair p_;
};

TEST_F(Length, SendOneByteTooLong) { expect_len_err(64, 65); }

TEST_F(Length, SendMuchLongerThanReceive) { expect_len_err(16, 4096); }

TEST_F(Length, SendLongerThanAllSgesTogether) { expect_len_err(3 * 100, 301, 3); }

TEST_F(Length, SendWithImmLongerThanReceive) { expect_len_err(32, 64, 1, IBV_WR_SEND_WITH_IMM); }

TEST_F(Length, ExactFitIsNotAnError) {
  // The boundary: a message exactly the receive's size is delivered.
  ibv_sge r = p_.b.sge(0, 64);
  ASSERT_EQ(post_recv(p_.b.qp, 10, &r, 1), 0);
  memset(p_.a.at(0), 0x42, 64);
  ibv_sge s = p_.a.sge(0, 64);
  ASSERT_EQ(post_send(p_.a.qp, 20, IBV_WR_SEND, &s, 1), 0);
  auto rc = poll_one(p_.b.recv_cq);
  ASSERT_TRUE(rc);
  EXPECT_EQ(rc->status, IBV_WC_SUCCESS) << ibv_wc_status_str(rc->status);
  EXPECT_EQ(rc->byte_len, 64u);
  auto sc = poll_one(p_.a.send_cq);
  ASSERT_TRUE(sc);
  EXPECT_EQ(sc->status, IBV_WC_SUCCESS) << ibv_wc_status_str(sc->status);
  EXPECT_EQ(memcmp(p_.a.at(0), p_.b.at(0), 64), 0);
}

TEST_F(Length, LaterReceivesOfTheResponderAreFlushed) {
  // The responder's QP goes to ERR too (IBA 10.3.1): its remaining posted
  // receives come back flushed, each exactly once.
  ibv_sge r0 = p_.b.sge(0, 16);
  ASSERT_EQ(post_recv(p_.b.qp, 100, &r0, 1), 0);
  for (uint64_t i = 1; i <= 3; ++i) {
    ibv_sge r = p_.b.sge(1024 * i, 16);
    ASSERT_EQ(post_recv(p_.b.qp, 100 + i, &r, 1), 0);
  }
  ibv_sge s = p_.a.sge(0, 32);
  ASSERT_EQ(post_send(p_.a.qp, 1, IBV_WR_SEND, &s, 1), 0);
  auto got = poll_n(p_.b.recv_cq, 4);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].wr_id, 100u);
  EXPECT_EQ(got[0].status, IBV_WC_LOC_LEN_ERR) << ibv_wc_status_str(got[0].status);
  for (uint64_t i = 1; i <= 3; ++i) {
    EXPECT_EQ(got[i].wr_id, 100 + i);
    EXPECT_EQ(got[i].status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(got[i].status);
  }
  EXPECT_TRUE(poll_for(p_.b.recv_cq, 10).empty());
  EXPECT_EQ(query_state(p_.b.qp), IBV_QPS_ERR);
}

}  // namespace
}  // namespace uroce::fault
