// Case 9: destroying an object that another live object still uses fails
// with EBUSY and leaves both intact and usable; once the user is gone the
// destroy succeeds.
//
// Rules: ibv_alloc_pd(3) ("ibv_dealloc_pd() may fail if any other resource
// is still associated with the PD"), ibv_create_cq(3) ("ibv_destroy_cq()
// fails if any queue pair is still associated with this CQ"),
// ibv_create_srq(3) (same for SRQs), ibv_create_comp_channel(3) ("fails if
// any CQs are still associated with the completion event channel").
#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

class BusyDestroy : public VerbsTest {
 protected:
  ibv_qp* make_qp(ibv_pd* pd, ibv_cq* scq, ibv_cq* rcq, ibv_srq* srq = nullptr) {
    ibv_qp_init_attr ia{};
    ia.send_cq = scq;
    ia.recv_cq = rcq;
    ia.srq = srq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = 4;
    ia.cap.max_recv_wr = srq ? 0 : 4;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = srq ? 0 : 1;
    return ibv_create_qp(pd, &ia);
  }
};

TEST_F(BusyDestroy, DeallocPdWithMrAlive) {
  ibv_pd* pd = ibv_alloc_pd(ctx_);
  ASSERT_NE(pd, nullptr);
  std::vector<uint8_t> mem(4096);
  ibv_mr* mr = ibv_reg_mr(pd, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ASSERT_EQ(ibv_dealloc_pd(pd), EBUSY) << "a refused destroy must leave the object alive";
  // Both still usable: another MR can be registered in the PD.
  ibv_mr* mr2 = ibv_reg_mr(pd, mem.data(), 64, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr2, nullptr);
  EXPECT_EQ(ibv_dereg_mr(mr2), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

TEST_F(BusyDestroy, DeallocPdWithQpAlive) {
  ibv_pd* pd = ibv_alloc_pd(ctx_);
  ibv_cq* cq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_TRUE(pd && cq);
  ibv_qp* qp = make_qp(pd, cq, cq);
  ASSERT_NE(qp, nullptr) << strerror(errno);
  ASSERT_EQ(ibv_dealloc_pd(pd), EBUSY) << "a refused destroy must leave the object alive";
  EXPECT_EQ(to_init(qp, kAllRemote), 0) << "the QP must survive the refused dealloc";
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

TEST_F(BusyDestroy, DeallocPdWithSrqOrAhAlive) {
  ibv_pd* pd = ibv_alloc_pd(ctx_);
  ASSERT_NE(pd, nullptr);
  ibv_srq_init_attr si{};
  si.attr.max_wr = 4;
  si.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(pd, &si);
  ASSERT_NE(srq, nullptr);
  ASSERT_EQ(ibv_dealloc_pd(pd), EBUSY) << "a refused destroy must leave the object alive";
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  ibv_ah_attr aa{};
  aa.is_global = 1;
  aa.grh.dgid = gid_;
  aa.grh.sgid_index = kGidIndex;
  aa.port_num = 1;
  ibv_ah* ah = ibv_create_ah(pd, &aa);
  ASSERT_NE(ah, nullptr);
  ASSERT_EQ(ibv_dealloc_pd(pd), EBUSY) << "a refused destroy must leave the object alive";
  EXPECT_EQ(ibv_destroy_ah(ah), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

TEST_F(BusyDestroy, DestroyCqWithQpAttached) {
  ibv_pd* pd = ibv_alloc_pd(ctx_);
  ibv_cq* scq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ibv_cq* rcq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_TRUE(pd && scq && rcq);
  ibv_qp* qp = make_qp(pd, scq, rcq);
  ASSERT_NE(qp, nullptr);
  // Send CQ and receive CQ are both in use.
  ASSERT_EQ(ibv_destroy_cq(scq), EBUSY) << "a refused destroy must leave the object alive";
  ASSERT_EQ(ibv_destroy_cq(rcq), EBUSY) << "a refused destroy must leave the object alive";
  // The CQs still work: a flushed receive lands in rcq.
  ASSERT_EQ(to_init(qp, kAllRemote), 0);
  std::vector<uint8_t> mem(64);
  ibv_mr* mr = ibv_reg_mr(pd, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ibv_sge r{reinterpret_cast<uint64_t>(mem.data()), 64, mr->lkey};
  ASSERT_EQ(post_recv(qp, 42, &r, 1), 0);
  ASSERT_EQ(to_state(qp, IBV_QPS_ERR), 0);
  auto wc = poll_one(rcq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->wr_id, 42u);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_cq(scq), 0);
  EXPECT_EQ(ibv_destroy_cq(rcq), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

TEST_F(BusyDestroy, DestroySrqWithQpAttached) {
  ibv_pd* pd = ibv_alloc_pd(ctx_);
  ibv_cq* cq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_TRUE(pd && cq);
  ibv_srq_init_attr si{};
  si.attr.max_wr = 4;
  si.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(pd, &si);
  ASSERT_NE(srq, nullptr);
  ibv_qp* qp = make_qp(pd, cq, cq, srq);
  ASSERT_NE(qp, nullptr) << strerror(errno);
  ASSERT_EQ(ibv_destroy_srq(srq), EBUSY) << "a refused destroy must leave the object alive";
  // Still usable.
  std::vector<uint8_t> mem(64);
  ibv_mr* mr = ibv_reg_mr(pd, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ibv_sge r{reinterpret_cast<uint64_t>(mem.data()), 64, mr->lkey};
  ibv_recv_wr w{};
  w.sg_list = &r;
  w.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_srq_recv(srq, &w, &bad), 0);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

TEST_F(BusyDestroy, DestroyCompChannelWithCqAttached) {
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx_);
  ASSERT_NE(ch, nullptr);
  ibv_cq* cq = ibv_create_cq(ctx_, 16, nullptr, ch, 0);
  ASSERT_NE(cq, nullptr);
  ASSERT_EQ(ibv_destroy_comp_channel(ch), EBUSY) << "a refused destroy must leave the object alive";
  // The channel is still a valid fd, and the CQ can still be armed.
  EXPECT_GE(fcntl(ch->fd, F_GETFD), 0);
  EXPECT_EQ(ibv_req_notify_cq(cq, 0), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

}  // namespace
}  // namespace uroce::fault
