// Case 1: a send-side SGE whose lkey is not valid for this QP completes with
// IBV_WC_LOC_PROT_ERR at the sender, nothing reaches the target, and the QP
// goes to ERR (later work is flushed).
//
// Rule: IBA vol. 1 ch. 10.6 (memory protection: an L_Key is valid only for
// its own region, in the QP's own protection domain, of the same CA context,
// with the access the operation needs) and ibv_poll_cq(3) IBV_WC_LOC_PROT_ERR
// ("the locally posted Work Request's buffers in the scatter/gather list does
// not reference a Memory Region that is valid for the requested operation").
#include <cstring>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

class LocalProtection : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    ASSERT_TRUE(make_rc_pair(ctx_, &p_));
    ibv_sge r = p_.b.sge(0, 4096);
    ASSERT_EQ(post_recv(p_.b.qp, 77, &r, 1), 0);
    memset(p_.a.at(0), 0xab, 256);
  }

  /// Posts one signaled SEND with `sge` and expects LOC_PROT_ERR, no delivery,
  /// and the sender's QP in ERR with later work flushed.
  void expect_loc_prot_err(ibv_sge sge, ibv_wr_opcode op = IBV_WR_SEND) {
    ASSERT_EQ(post_send(p_.a.qp, 1, op, &sge, 1, p_.b.addr(8192), p_.b.mr->rkey), 0);
    auto wc = poll_one(p_.a.send_cq);
    ASSERT_TRUE(wc) << "no completion within " << kWaitMs << " ms";
    EXPECT_EQ(wc->wr_id, 1u);
    EXPECT_EQ(wc->status, IBV_WC_LOC_PROT_ERR) << ibv_wc_status_str(wc->status);
    EXPECT_EQ(wc->qp_num, p_.a.qp->qp_num);
    // Nothing was delivered: the target's receive is still posted and its
    // buffer untouched.
    EXPECT_TRUE(poll_for(p_.b.recv_cq, 20).empty());
    EXPECT_EQ(p_.b.buf[0], 0);
    EXPECT_EQ(p_.b.buf[8192], 0);
    // IBA 10.3.1: a completion error moves the QP to ERR; later work flushes.
    EXPECT_EQ(query_state(p_.a.qp), IBV_QPS_ERR);
    ibv_sge ok = p_.a.sge(0, 16);
    ASSERT_EQ(post_send(p_.a.qp, 2, IBV_WR_SEND, &ok, 1), 0);
    auto fl = poll_one(p_.a.send_cq);
    ASSERT_TRUE(fl);
    EXPECT_EQ(fl->wr_id, 2u);
    EXPECT_EQ(fl->status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(fl->status);
  }

  RcPair p_;
};

TEST_F(LocalProtection, GarbageLkey) {
  // A key no MR was ever given (same slot, other random high bits, and pure junk).
  expect_loc_prot_err(ibv_sge{p_.a.addr(0), 64, p_.a.mr->lkey ^ 0x5a000000u});
}

TEST_F(LocalProtection, ZeroLkey) { expect_loc_prot_err(ibv_sge{p_.a.addr(0), 64, 0}); }

TEST_F(LocalProtection, DeregisteredLkey) {
  // A key that was valid once: after ibv_dereg_mr it must not reach memory.
  ibv_mr* gone = ibv_reg_mr(p_.a.pd, p_.a.at(0), 4096, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(gone, nullptr);
  uint32_t key = gone->lkey;
  ASSERT_EQ(ibv_dereg_mr(gone), 0);
  expect_loc_prot_err(ibv_sge{p_.a.addr(0), 64, key});
}

TEST_F(LocalProtection, KeyOfAnotherPd) {
  // b's MR lives in b's PD (same context): foreign to a's QP.
  expect_loc_prot_err(ibv_sge{p_.b.addr(4096), 64, p_.b.mr->lkey});
}

TEST_F(LocalProtection, KeyOfAnotherContext) {
  // An MR of a second context of the same device, in the same process.
  ibv_context* other = open_lo();
  ASSERT_NE(other, nullptr);
  ibv_pd* pd = ibv_alloc_pd(other);
  ASSERT_NE(pd, nullptr);
  std::vector<uint8_t> mem(4096, 0x11);
  // Keys are (random << 16 | slot): in the rare case the other context handed
  // out one of our keys, register again to get a different one.
  std::vector<ibv_mr*> mrs;
  ibv_mr* mr = nullptr;
  for (int i = 0; i < 8 && !mr; ++i) {
    ibv_mr* m = ibv_reg_mr(pd, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(m, nullptr);
    mrs.push_back(m);
    if (m->lkey != p_.a.mr->lkey && m->lkey != p_.b.mr->lkey) mr = m;
  }
  ASSERT_NE(mr, nullptr);
  expect_loc_prot_err(ibv_sge{reinterpret_cast<uint64_t>(mem.data()), 64, mr->lkey});
  for (ibv_mr* m : mrs) EXPECT_EQ(ibv_dereg_mr(m), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(ibv_close_device(other), 0);
}

TEST_F(LocalProtection, RangeOutsideRegion) {
  // Right key, but the SGE runs past the end of the region.
  expect_loc_prot_err(ibv_sge{p_.a.addr(p_.a.buf.size() - 32), 64, p_.a.mr->lkey});
}

TEST_F(LocalProtection, RangeBeforeRegion) {
  expect_loc_prot_err(ibv_sge{p_.a.addr(0) - 64, 64, p_.a.mr->lkey});
}

TEST_F(LocalProtection, ForeignKeyInSecondSge) {
  // Every SGE is checked, not only the first.
  ibv_sge s[2] = {p_.a.sge(0, 32), ibv_sge{p_.b.addr(4096), 32, p_.b.mr->lkey}};
  ASSERT_EQ(post_send(p_.a.qp, 1, IBV_WR_SEND, s, 2), 0);
  auto wc = poll_one(p_.a.send_cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_LOC_PROT_ERR) << ibv_wc_status_str(wc->status);
  EXPECT_TRUE(poll_for(p_.b.recv_cq, 20).empty());
}

TEST_F(LocalProtection, ForeignKeyOnRdmaWrite) {
  expect_loc_prot_err(ibv_sge{p_.b.addr(4096), 64, p_.b.mr->lkey}, IBV_WR_RDMA_WRITE);
}

TEST_F(LocalProtection, ReadIntoRegionWithoutLocalWrite) {
  // IBA 10.6: an RDMA READ writes its local SGEs, so they need Local Write.
  ibv_mr* ro = ibv_reg_mr(p_.a.pd, p_.a.at(16384), 4096, 0);
  ASSERT_NE(ro, nullptr);
  ibv_sge s{p_.a.addr(16384), 64, ro->lkey};
  ASSERT_EQ(post_send(p_.a.qp, 1, IBV_WR_RDMA_READ, &s, 1, p_.b.addr(0), p_.b.mr->rkey), 0);
  auto wc = poll_one(p_.a.send_cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_LOC_PROT_ERR) << ibv_wc_status_str(wc->status);
  EXPECT_EQ(query_state(p_.a.qp), IBV_QPS_ERR);
  ibv_dereg_mr(ro);
}

}  // namespace
}  // namespace uroce::fault
