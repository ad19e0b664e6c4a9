// Memory windows (IBA 10.6.7), as rdma-core's test suite uses them (pyverbs
// tests/test_mr.py MWTest, tests/test_qpex.py test_qp_ex_rc_bind_mw): type 1
// bound with ibv_bind_mw, type 2 with a BIND_MW work request, invalidated by
// a zero-length bind, LOCAL_INV, a SEND with Invalidate, or deallocation.
// `b` owns the memory and the windows; `a` writes through them.
#include <cerrno>
#include <cstring>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

constexpr size_t kWin = 4096, kWinLen = 1024;

class MemoryWindow : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    EndpointOptions o;
    o.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;  // no remote right of its own
    ASSERT_TRUE(make_rc_pair(ctx_, &p_, o));
  }
  /// a writes 64 bytes at `off` of b's buffer through `rkey`; the status.
  ibv_wc_status write_at(size_t off, uint32_t rkey) {
    memset(p_.a.at(0), int(0x40 + (++n_ & 0x3f)), 64);
    ibv_sge s = p_.a.sge(0, 64);
    if (post_send(p_.a.qp, 100 + n_, IBV_WR_RDMA_WRITE, &s, 1, p_.b.addr(off), rkey) != 0)
      return IBV_WC_GENERAL_ERR;
    auto wc = poll_one(p_.a.send_cq);
    return wc ? wc->status : IBV_WC_GENERAL_ERR;
  }
  bool landed(size_t off) const { return p_.b.buf[off] == p_.a.buf[0] && p_.b.buf[off + 63] == p_.a.buf[63]; }
  /// The completion of a local operation on b's send queue.
  std::optional<ibv_wc> local_done() { return poll_one(p_.b.send_cq); }
  /// b binds type 2 window `mw` over [kWin, kWin+kWinLen) with remote write.
  ibv_wc_status bind2(ibv_mw* mw, uint32_t new_key, ibv_mr* mr = nullptr, uint64_t len = kWinLen) {
    ibv_send_wr w{};
    w.wr_id = 7;
    w.opcode = IBV_WR_BIND_MW;
    w.send_flags = IBV_SEND_SIGNALED;
    w.bind_mw.mw = mw;
    w.bind_mw.rkey = new_key;
    w.bind_mw.bind_info = ibv_mw_bind_info{mr ? mr : p_.b.mr, p_.b.addr(kWin), len, IBV_ACCESS_REMOTE_WRITE};
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(p_.b.qp, &w, &bad) != 0) return IBV_WC_GENERAL_ERR;
    auto wc = local_done();
    if (!wc) return IBV_WC_GENERAL_ERR;
    EXPECT_EQ(wc->wr_id, 7u);
    if (wc->status == IBV_WC_SUCCESS) {
      EXPECT_EQ(wc->opcode, IBV_WC_BIND_MW);
    }
    return wc->status;
  }
  RcPair p_;
  int n_ = 0;
};

TEST_F(MemoryWindow, OfferedAndAllocated) {
  ibv_device_attr a{};
  ASSERT_EQ(ibv_query_device(ctx_, &a), 0);
  EXPECT_TRUE(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
  EXPECT_TRUE(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
  EXPECT_GT(a.max_mw, 0);
  errno = 0;
  EXPECT_EQ(ibv_alloc_mw(p_.b.pd, ibv_mw_type(3)), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_mw* one = ibv_alloc_mw(p_.b.pd, IBV_MW_TYPE_1);
  ibv_mw* two = ibv_alloc_mw(p_.b.pd, IBV_MW_TYPE_2);
  ASSERT_TRUE(one && two) << strerror(errno);
  EXPECT_EQ(one->type, IBV_MW_TYPE_1);
  EXPECT_EQ(two->type, IBV_MW_TYPE_2);
  EXPECT_EQ(two->pd, p_.b.pd);
  EXPECT_EQ(ibv_dealloc_pd(p_.b.pd), EBUSY) << "windows live in it";
  EXPECT_EQ(ibv_dealloc_mw(one), 0);
  EXPECT_EQ(write_at(kWin, two->rkey), IBV_WC_REM_ACCESS_ERR) << "an unbound window reaches nothing";
  EXPECT_EQ(ibv_dealloc_mw(two), 0);
}

TEST_F(MemoryWindow, Type1BindsWithItsVerbAndUnbindsWithZeroLength) {
  ibv_mw* mw = ibv_alloc_mw(p_.b.pd, IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr);
  const uint32_t before = mw->rkey;
  ibv_mw_bind bind{};
  bind.wr_id = 5;
  bind.send_flags = IBV_SEND_SIGNALED;
  bind.bind_info = ibv_mw_bind_info{p_.b.mr, p_.b.addr(kWin), kWinLen, IBV_ACCESS_REMOTE_WRITE};
  ASSERT_EQ(ibv_bind_mw(p_.b.qp, mw, &bind), 0);
  EXPECT_EQ(mw->rkey, ibv_inc_rkey(before)) << "only the key's low byte moves";
  auto wc = local_done();
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc->opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(wc->wr_id, 5u);
  EXPECT_EQ(write_at(kWin + 100, mw->rkey), IBV_WC_SUCCESS);
  EXPECT_TRUE(landed(kWin + 100));
  EXPECT_EQ(ibv_dereg_mr(p_.b.mr), EINVAL) << "a window is bound over it";
  EXPECT_NE(ibv_rereg_mr(p_.b.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND),
            0)
      << "nor re-registered under it";

  bind.bind_info = ibv_mw_bind_info{p_.b.mr, 0, 0, 0};  // zero length: unbind
  ASSERT_EQ(ibv_bind_mw(p_.b.qp, mw, &bind), 0);
  wc = local_done();
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  EXPECT_EQ(write_at(kWin + 100, mw->rkey), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

TEST_F(MemoryWindow, Type2BindsWithAWorkRequestAndLocalInvalidate) {
  ibv_mw* mw = ibv_alloc_mw(p_.b.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  const uint32_t key = ibv_inc_rkey(mw->rkey);
  ASSERT_EQ(bind2(mw, key), IBV_WC_SUCCESS);
  EXPECT_EQ(mw->rkey, key);
  EXPECT_EQ(write_at(kWin, key), IBV_WC_SUCCESS);
  EXPECT_TRUE(landed(kWin));
  ibv_send_wr inv{};
  inv.wr_id = 9;
  inv.opcode = IBV_WR_LOCAL_INV;
  inv.send_flags = IBV_SEND_SIGNALED;
  inv.invalidate_rkey = key;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(p_.b.qp, &inv, &bad), 0);
  auto wc = local_done();
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc->opcode, IBV_WC_LOCAL_INV);
  // Invalid now, so it binds again (with the next key).
  ASSERT_EQ(bind2(mw, ibv_inc_rkey(key)), IBV_WC_SUCCESS);
  EXPECT_EQ(write_at(kWin + 8, ibv_inc_rkey(key)), IBV_WC_SUCCESS);
  EXPECT_EQ(write_at(kWin + 8, key), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

TEST_F(MemoryWindow, Type2BoundAlreadyIsABindError) {
  ibv_mw* mw = ibv_alloc_mw(p_.b.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  const uint32_t key = ibv_inc_rkey(mw->rkey);
  ASSERT_EQ(bind2(mw, key), IBV_WC_SUCCESS);
  EXPECT_EQ(bind2(mw, ibv_inc_rkey(key)), IBV_WC_MW_BIND_ERR) << "invalidate it first";
  EXPECT_EQ(query_state(p_.b.qp), IBV_QPS_ERR);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

// A SEND with Invalidate from the peer revokes b's window where it lands;
// the receive says which key went.
TEST_F(MemoryWindow, Type2RemoteInvalidate) {
  ibv_mw* mw = ibv_alloc_mw(p_.b.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  const uint32_t key = ibv_inc_rkey(mw->rkey);
  ASSERT_EQ(bind2(mw, key), IBV_WC_SUCCESS);
  EXPECT_EQ(write_at(kWin, key), IBV_WC_SUCCESS);
  ibv_sge rs = p_.b.sge(0, 64), ss = p_.a.sge(0, 64);
  ASSERT_EQ(post_recv(p_.b.qp, 11, &rs, 1), 0);
  ibv_send_wr w{};
  w.wr_id = 12;
  w.opcode = IBV_WR_SEND_WITH_INV;
  w.send_flags = IBV_SEND_SIGNALED;
  w.sg_list = &ss;
  w.num_sge = 1;
  w.invalidate_rkey = key;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(p_.a.qp, &w, &bad), 0);
  auto s = poll_one(p_.a.send_cq);
  auto r = poll_one(p_.b.recv_cq);
  ASSERT_TRUE(s && r);
  EXPECT_EQ(s->status, IBV_WC_SUCCESS) << ibv_wc_status_str(s->status);
  EXPECT_EQ(r->status, IBV_WC_SUCCESS) << ibv_wc_status_str(r->status);
  EXPECT_TRUE(r->wc_flags & IBV_WC_WITH_INV);
  EXPECT_EQ(r->invalidated_rkey, key);
  EXPECT_EQ(write_at(kWin, key), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

TEST_F(MemoryWindow, RemoteInvalidateOfAnUnknownKeyIsAnInvalidRequest) {
  ibv_sge rs = p_.b.sge(0, 64), ss = p_.a.sge(0, 64);
  ASSERT_EQ(post_recv(p_.b.qp, 11, &rs, 1), 0);
  ibv_send_wr w{};
  w.wr_id = 12;
  w.opcode = IBV_WR_SEND_WITH_INV;
  w.send_flags = IBV_SEND_SIGNALED;
  w.sg_list = &ss;
  w.num_sge = 1;
  w.invalidate_rkey = p_.b.mr->rkey;  // a region, not a window
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(p_.a.qp, &w, &bad), 0);
  auto s = poll_one(p_.a.send_cq);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->status, IBV_WC_REM_INV_REQ_ERR) << ibv_wc_status_str(s->status);
  auto r = poll_one(p_.b.recv_cq);
  ASSERT_TRUE(r);
  EXPECT_NE(r->status, IBV_WC_SUCCESS);
}

// Type 2 windows answer only through the QP they were bound through.
TEST_F(MemoryWindow, Type2AnswersOnlyThroughItsQp) {
  ibv_mw* mw = ibv_alloc_mw(p_.b.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  const uint32_t key = ibv_inc_rkey(mw->rkey);
  ASSERT_EQ(bind2(mw, key), IBV_WC_SUCCESS);
  // A second connection into b's PD: c (a's PD) -> d (b's PD).
  auto make = [&](ibv_pd* pd, ibv_cq* cq) {
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    return ibv_create_qp(pd, &ia);
  };
  ibv_cq* cq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ibv_qp* c = make(p_.a.pd, cq);
  ibv_qp* d = make(p_.b.pd, cq);
  ASSERT_TRUE(cq && c && d);
  ASSERT_EQ(connect_rc(c, d->qp_num, gid_, RcParams{}), 0);
  ASSERT_EQ(connect_rc(d, c->qp_num, gid_, RcParams{}), 0);
  ibv_sge s = p_.a.sge(0, 64);
  ASSERT_EQ(post_send(c, 1, IBV_WR_RDMA_WRITE, &s, 1, p_.b.addr(kWin), key), 0);
  auto wc = poll_one(cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_REM_ACCESS_ERR) << "through another QP of the PD";
  EXPECT_EQ(write_at(kWin, key), IBV_WC_SUCCESS) << "through the QP it was bound through";
  EXPECT_EQ(ibv_destroy_qp(c), 0);
  EXPECT_EQ(ibv_destroy_qp(d), 0);
  poll_for(cq, 10);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

TEST_F(MemoryWindow, ARegionWithoutMwBindIsABindError) {
  ibv_mr* plain = ibv_reg_mr(p_.b.pd, p_.b.at(0), 8192, IBV_ACCESS_LOCAL_WRITE);
  ibv_mw* mw = ibv_alloc_mw(p_.b.pd, IBV_MW_TYPE_2);
  ASSERT_TRUE(plain && mw);
  EXPECT_EQ(bind2(mw, ibv_inc_rkey(mw->rkey), plain), IBV_WC_MW_BIND_ERR);
  EXPECT_EQ(query_state(p_.b.qp), IBV_QPS_ERR);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
  EXPECT_EQ(ibv_dereg_mr(plain), 0);
}

TEST_F(MemoryWindow, AKeyOfAnotherSlotIsABindError) {
  ibv_mw* mw = ibv_alloc_mw(p_.b.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  EXPECT_EQ(bind2(mw, mw->rkey ^ 0x100u), IBV_WC_MW_BIND_ERR);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

TEST_F(MemoryWindow, ARangePastTheRegionIsABindError) {
  ibv_mw* mw = ibv_alloc_mw(p_.b.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  EXPECT_EQ(bind2(mw, ibv_inc_rkey(mw->rkey), nullptr, p_.b.buf.size()), IBV_WC_MW_BIND_ERR);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

TEST_F(MemoryWindow, DeallocatingABoundWindowEndsIt) {
  ibv_mw* mw = ibv_alloc_mw(p_.b.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  const uint32_t key = ibv_inc_rkey(mw->rkey);
  ASSERT_EQ(bind2(mw, key), IBV_WC_SUCCESS);
  EXPECT_EQ(write_at(kWin, key), IBV_WC_SUCCESS);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
  EXPECT_EQ(write_at(kWin, key), IBV_WC_REM_ACCESS_ERR);
}

}  // namespace
}  // namespace uroce::fault
