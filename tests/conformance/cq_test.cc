// Completion queue sizes as rdma-core's test suite checks them (pyverbs
// tests/test_cq.py, test_resize_cq).
#include <cerrno>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

using CqSize = VerbsTest;

// ibv_cq.cqe is what the program may fill: a power of two minus one at least
// as large as asked (mlx5's and rxe's rounding), also after ibv_resize_cq.
TEST_F(CqSize, ReportsTheRoundedRequestNotTheRing) {
  for (int ask : {1, 3, 7, 100, 4095}) {
    ibv_cq* cq = ibv_create_cq(ctx_, ask, nullptr, nullptr, 0);
    ASSERT_NE(cq, nullptr) << strerror(errno);
    int want = 1;
    while (want < ask + 1) want <<= 1;
    EXPECT_EQ(cq->cqe, want - 1) << "asked " << ask;
    EXPECT_EQ(ibv_resize_cq(cq, 1), 0);
    EXPECT_EQ(cq->cqe, 1);
    EXPECT_EQ(ibv_resize_cq(cq, 200), 0);
    EXPECT_EQ(cq->cqe, 255);
    EXPECT_EQ(ibv_destroy_cq(cq), 0);
  }
}

// test_resize_cq: a CQ of 3 resized to 1 and then to 7 is filled with
// cq->cqe - 1 completions, unpolled, through a send queue of 10. With the
// ring's size (63) reported, the 11th post failed with ENOMEM.
TEST_F(CqSize, FillingTheReportedSizeFitsASmallSendQueue) {
  EndpointOptions o;
  o.max_send_wr = 10;
  o.cqe = 3;
  RcPair p;
  ASSERT_TRUE(make_rc_pair(ctx_, &p, o));
  ibv_cq* cq = p.a.send_cq;
  ASSERT_EQ(cq->cqe, 3);
  ASSERT_EQ(ibv_resize_cq(cq, 1), 0);
  ASSERT_GE(cq->cqe, 1);
  ASSERT_EQ(ibv_resize_cq(cq, 7), 0);
  ASSERT_GE(cq->cqe, 7);
  ASSERT_LE(cq->cqe - 1, 10) << "more completions than the send queue holds";
  for (int i = 0; i < cq->cqe - 1; ++i) {
    ibv_sge s = p.a.sge(size_t(i) * 8, 8);
    ASSERT_EQ(post_send(p.a.qp, uint64_t(i), IBV_WR_RDMA_WRITE, &s, 1, p.b.addr(size_t(i) * 8), p.b.mr->rkey),
              0)
        << "post " << i;
  }
  std::vector<ibv_wc> wcs = poll_n(cq, size_t(cq->cqe - 1));
  ASSERT_EQ(wcs.size(), size_t(cq->cqe - 1));
  for (size_t i = 0; i < wcs.size(); ++i) {
    EXPECT_EQ(wcs[i].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wcs[i].status);
    EXPECT_EQ(wcs[i].wr_id, i);
  }
}

}  // namespace
}  // namespace uroce::fault
