// ibv_rereg_mr and a QP's way back from ERR through RESET, as rdma-core's
// test suite checks them (pyverbs tests/test_mr.py, test_mr_rereg_pd and
// test_mr_rereg_addr): traffic that the re-registration breaks fails with a
// remote operation error, and after both QPs go RESET -> RTS it works again,
// with no completion of the failed round left in the CQs (a QP moved to RESET
// takes its queued completions with it, as mlx5 cleans its CQs then).
#include <cstdlib>
#include <cstring>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

constexpr uint32_t kMsg = 64;

class MrRereg : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    ASSERT_TRUE(make_rc_pair(ctx_, &p_));
  }
  /// One SEND each way (a -> b, then b -> a) from offset 0 of a's buffer into
  /// `b_recv` and back; every completion must be a success.
  void round_trip_ok(ibv_sge b_recv) {
    ibv_sge ar = p_.a.sge(kMsg, kMsg), as = p_.a.sge(0, kMsg);
    ASSERT_EQ(post_recv(p_.b.qp, 10, &b_recv, 1), 0);
    ASSERT_EQ(post_recv(p_.a.qp, 11, &ar, 1), 0);
    ASSERT_EQ(post_send(p_.a.qp, 12, IBV_WR_SEND, &as, 1), 0);
    expect_success(p_.a.send_cq, 12);
    expect_success(p_.b.recv_cq, 10);
    ibv_sge bs = b_recv;
    ASSERT_EQ(post_send(p_.b.qp, 13, IBV_WR_SEND, &bs, 1), 0);
    expect_success(p_.b.send_cq, 13);
    expect_success(p_.a.recv_cq, 11);
  }
  static void expect_success(ibv_cq* cq, uint64_t wr_id) {
    auto wc = poll_one(cq);
    ASSERT_TRUE(wc.has_value()) << "no completion for wr " << wr_id;
    EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << "wr " << wc->wr_id << ": " << ibv_wc_status_str(wc->status);
    EXPECT_EQ(wc->wr_id, wr_id);
  }
  /// a SENDs into b's posted receive `b_recv`, which b's MR no longer covers:
  /// a's completion is IBV_WC_REM_OP_ERR. Both QPs end in ERR, a's posted
  /// receive flushed into its CQ and b's failure in b's.
  void round_trip_fails(ibv_sge b_recv) {
    ibv_sge ar = p_.a.sge(kMsg, kMsg), as = p_.a.sge(0, kMsg);
    ASSERT_EQ(post_recv(p_.b.qp, 20, &b_recv, 1), 0);
    ASSERT_EQ(post_recv(p_.a.qp, 21, &ar, 1), 0);
    ASSERT_EQ(post_send(p_.a.qp, 22, IBV_WR_SEND, &as, 1), 0);
    auto wc = poll_one(p_.a.send_cq);
    ASSERT_TRUE(wc.has_value());
    EXPECT_EQ(wc->status, IBV_WC_REM_OP_ERR) << ibv_wc_status_str(wc->status);
    // b's side failed too: its QP is in ERR before a's completion is seen.
    EXPECT_EQ(query_state(p_.b.qp), IBV_QPS_ERR);
  }
  /// Both QPs RESET -> INIT -> RTR -> RTS, as pyverbs' restate_qps.
  void restate() {
    for (ibv_qp* q : {p_.a.qp, p_.b.qp}) ASSERT_EQ(to_state(q, IBV_QPS_RESET), 0);
    ASSERT_EQ(connect_rc(p_.a.qp, p_.b.qp->qp_num, gid_, RcParams{}), 0);
    ASSERT_EQ(connect_rc(p_.b.qp, p_.a.qp->qp_num, gid_, RcParams{}), 0);
  }
  RcPair p_;
};

TEST_F(MrRereg, ChangePdBreaksTrafficUntilChangedBack) {
  round_trip_ok(p_.b.sge(0, kMsg));
  ibv_pd* other = ibv_alloc_pd(ctx_);
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(ibv_rereg_mr(p_.b.mr, IBV_REREG_MR_CHANGE_PD, other, nullptr, 0, 0), 0);
  EXPECT_EQ(p_.b.mr->pd, other);
  round_trip_fails(p_.b.sge(0, kMsg));
  restate();
  ASSERT_EQ(ibv_rereg_mr(p_.b.mr, IBV_REREG_MR_CHANGE_PD, p_.b.pd, nullptr, 0, 0), 0);
  round_trip_ok(p_.b.sge(0, kMsg));
  // Back to the other PD: a PD holding a re-registered MR cannot go first.
  ASSERT_EQ(ibv_rereg_mr(p_.b.mr, IBV_REREG_MR_CHANGE_PD, other, nullptr, 0, 0), 0);
  EXPECT_EQ(ibv_dealloc_pd(other), EBUSY);
  ASSERT_EQ(ibv_rereg_mr(p_.b.mr, IBV_REREG_MR_CHANGE_PD, p_.b.pd, nullptr, 0, 0), 0);
  EXPECT_EQ(ibv_dealloc_pd(other), 0);
}

TEST_F(MrRereg, ChangeTranslationLeavesOldReceivesOutside) {
  void* fresh = nullptr;
  ASSERT_EQ(posix_memalign(&fresh, 4096, kMsg), 0);
  const uint32_t lkey = p_.b.mr->lkey;
  ibv_sge old_recv = p_.b.sge(0, kMsg);
  ASSERT_EQ(ibv_rereg_mr(p_.b.mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, fresh, kMsg, 0), 0);
  EXPECT_EQ(p_.b.mr->addr, fresh);
  EXPECT_EQ(p_.b.mr->length, kMsg);
  round_trip_fails(old_recv);
  restate();
  round_trip_ok(ibv_sge{reinterpret_cast<uint64_t>(fresh), kMsg, lkey});
  ASSERT_EQ(ibv_dereg_mr(p_.b.mr), 0);
  p_.b.mr = nullptr;
  free(fresh);
}

// pyverbs polls one CQ per side for both queues and stops at the first bad
// completion: the failed SEND's REM_OP_ERR must come before the flush of the
// receive the same QP had posted (over UDP the flush came first).
TEST_F(MrRereg, SharedCqShowsTheErrorBeforeTheFlushes) {
  ibv_cq* cq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp_init_attr ia{};
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ibv_qp* a = ibv_create_qp(p_.a.pd, &ia);
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(connect_rc(a, p_.b.qp->qp_num, gid_, RcParams{}), 0);
  ASSERT_EQ(to_state(p_.b.qp, IBV_QPS_RESET), 0);
  ASSERT_EQ(connect_rc(p_.b.qp, a->qp_num, gid_, RcParams{}), 0);
  ibv_pd* other = ibv_alloc_pd(ctx_);
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(ibv_rereg_mr(p_.b.mr, IBV_REREG_MR_CHANGE_PD, other, nullptr, 0, 0), 0);
  ibv_sge br = p_.b.sge(0, kMsg), ar = p_.a.sge(kMsg, kMsg), as = p_.a.sge(0, kMsg);
  ASSERT_EQ(post_recv(p_.b.qp, 1, &br, 1), 0);
  ASSERT_EQ(post_recv(a, 2, &ar, 1), 0);
  ASSERT_EQ(post_send(a, 3, IBV_WR_SEND, &as, 1), 0);
  std::vector<ibv_wc> wcs = poll_n(cq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 3u);
  EXPECT_EQ(wcs[0].status, IBV_WC_REM_OP_ERR) << ibv_wc_status_str(wcs[0].status);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[1].status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(wcs[1].status);
  EXPECT_EQ(ibv_destroy_qp(a), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  ASSERT_EQ(ibv_rereg_mr(p_.b.mr, IBV_REREG_MR_CHANGE_PD, p_.b.pd, nullptr, 0, 0), 0);
  EXPECT_EQ(ibv_dealloc_pd(other), 0);
}

// The rule underneath: RESET removes exactly the QP's own queued completions
// from a CQ it shares, and leaves the others, in order.
TEST_F(MrRereg, ResetTakesOnlyItsOwnCompletionsFromASharedCq) {
  ibv_cq* cq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp* q[2] = {};
  for (ibv_qp*& x : q) {
    ibv_qp_init_attr ia{};
    ia.send_cq = cq;
    ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    x = ibv_create_qp(p_.a.pd, &ia);
    ASSERT_NE(x, nullptr);
    ASSERT_EQ(to_init(x, IBV_ACCESS_LOCAL_WRITE), 0);
  }
  ibv_sge s = p_.a.sge(0, kMsg);
  ASSERT_EQ(post_recv(q[0], 100, &s, 1), 0);
  ASSERT_EQ(post_recv(q[1], 200, &s, 1), 0);
  ASSERT_EQ(post_recv(q[0], 101, &s, 1), 0);
  // To ERR: each posted receive completes as flushed into the shared CQ.
  ASSERT_EQ(to_state(q[0], IBV_QPS_ERR), 0);
  ASSERT_EQ(to_state(q[1], IBV_QPS_ERR), 0);
  ASSERT_EQ(to_state(q[0], IBV_QPS_RESET), 0);
  std::vector<ibv_wc> left = poll_for(cq, 200);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].wr_id, 200u);
  EXPECT_EQ(left[0].qp_num, q[1]->qp_num);
  EXPECT_EQ(left[0].status, IBV_WC_WR_FLUSH_ERR);
  for (ibv_qp* x : q) EXPECT_EQ(ibv_destroy_qp(x), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

}  // namespace
}  // namespace uroce::fault
