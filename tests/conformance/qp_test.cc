// QP creation as rdma-core's test suite draws it (pyverbs tests/test_qp.py:
// random_qp_init_attr_ex picks IBV_QP_INIT_ATTR_CREATE_FLAGS at random and,
// for a device that is not Mellanox's, an empty set of flags).
#include <cerrno>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

class QpCreateEx : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    pd_ = ibv_alloc_pd(ctx_);
    cq_ = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
    ASSERT_TRUE(pd_ && cq_);
  }
  void TearDown() override {
    if (cq_) ibv_destroy_cq(cq_);
    if (pd_) ibv_dealloc_pd(pd_);
  }
  ibv_qp_init_attr_ex attr(ibv_qp_type t) const {
    ibv_qp_init_attr_ex a{};
    a.qp_type = t;
    a.send_cq = cq_;
    a.recv_cq = cq_;
    a.cap.max_send_wr = a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
    a.pd = pd_;
    return a;
  }
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
};

// An empty set of create flags is no request: every QP type is created.
TEST_F(QpCreateEx, EmptyCreateFlagsAreAccepted) {
  for (ibv_qp_type t : {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD}) {
    ibv_qp_init_attr_ex a = attr(t);
    ibv_qp* qp = ibv_create_qp_ex(ctx_, &a);
    ASSERT_NE(qp, nullptr) << "type " << t << ": " << strerror(errno);
    EXPECT_EQ(qp->state, IBV_QPS_RESET);
    EXPECT_EQ(ibv_destroy_qp(qp), 0);
  }
}

// A flag uroce does not implement is still refused, as rxe refuses any.
TEST_F(QpCreateEx, AnyCreateFlagIsRefused) {
  ibv_qp_init_attr_ex a = attr(IBV_QPT_UD);
  a.create_flags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB;
  errno = 0;
  ibv_qp* qp = ibv_create_qp_ex(ctx_, &a);
  EXPECT_EQ(qp, nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  if (qp) ibv_destroy_qp(qp);
}

// A CQ already destroyed is refused (EINVAL, as the kernel refuses a stale
// handle), never used: cmtime's server passes its first connection's CQs to
// every later rdma_create_qp (rdma_create_qp writes them back into its
// attributes), after that connection destroyed them.
TEST_F(QpCreateEx, ADestroyedCqIsRefused) {
  ibv_cq* gone = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_NE(gone, nullptr);
  ASSERT_EQ(ibv_destroy_cq(gone), 0);
  ibv_qp_init_attr_ex a = attr(IBV_QPT_RC);
  a.comp_mask = IBV_QP_INIT_ATTR_PD;
  for (int side = 0; side < 2; ++side) {
    (side ? a.recv_cq : a.send_cq) = gone;
    errno = 0;
    ibv_qp* qp = ibv_create_qp_ex(ctx_, &a);
    EXPECT_EQ(qp, nullptr) << "side " << side;
    EXPECT_EQ(errno, EINVAL) << "side " << side;
    if (qp) ibv_destroy_qp(qp);
    a.send_cq = a.recv_cq = cq_;
  }
}

}  // namespace
}  // namespace uroce::fault
