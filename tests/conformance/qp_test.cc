// QP creation as rdma-core's test suite draws it (pyverbs tests/test_qp.py:
// random_qp_init_attr_ex picks IBV_QP_INIT_ATTR_CREATE_FLAGS at random and,
// for a device that is not Mellanox's, an empty set of flags).
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

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

/// The size of this process's context segments (the memfds named
/// "uroce-ctx"), summed.
uint64_t segment_bytes() {
  uint64_t total = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return 0;
  while (dirent* e = readdir(d)) {
    char path[64], target[256];
    snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
    const ssize_t n = readlink(path, target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = 0;
    struct stat st;
    if (strstr(target, "memfd:uroce-ctx") && stat(path, &st) == 0) total += uint64_t(st.st_size);
  }
  closedir(d);
  return total;
}

// QP numbers come in batches for places in the segment (core/context.h):
// a program that keeps creating and destroying QPs gets the places back, so
// its segment stops growing, and every QP gets a number no live QP has.
TEST_F(QpCreateEx, CreatingAndDestroyingQpsReusesTheirPlaces) {
  auto cycle = [&](int n, std::set<uint32_t>* seen) {
    for (int i = 0; i < n; ++i) {
      ibv_qp_init_attr_ex a = attr(IBV_QPT_RC);
      a.comp_mask = IBV_QP_INIT_ATTR_PD;
      ibv_qp* held = ibv_create_qp_ex(ctx_, &a);  // two live at a time, as a server's connections overlap
      ibv_qp* qp = ibv_create_qp_ex(ctx_, &a);
      ASSERT_TRUE(held && qp) << strerror(errno);
      EXPECT_NE(held->qp_num, qp->qp_num);
      if (seen) seen->insert(qp->qp_num);
      ASSERT_EQ(ibv_destroy_qp(qp), 0);
      ASSERT_EQ(ibv_destroy_qp(held), 0);
    }
  };
  ASSERT_NO_FATAL_FAILURE(cycle(40, nullptr));
  const uint64_t before = segment_bytes();
  ASSERT_GT(before, 0u);
  std::set<uint32_t> seen;
  ASSERT_NO_FATAL_FAILURE(cycle(2000, &seen));
  EXPECT_EQ(segment_bytes(), before) << "the segment grew while QPs came and went";
  EXPECT_GT(seen.size(), 1000u) << "QP numbers came back too soon";
}

}  // namespace
}  // namespace uroce::fault
