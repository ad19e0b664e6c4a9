// Thread and parent domains (ibv_alloc_td, ibv_alloc_parent_domain), as
// rdma-core's test suite uses them (pyverbs tests/test_parent_domain.py): a
// parent domain is interchangeable with the PD it extends. uroce's queues
// live in its shared segment, so the custom allocators are never asked.
#include <cerrno>
#include <cstring>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

int g_allocs = 0;
void* count_alloc(ibv_pd*, void*, size_t, size_t, uint64_t) {
  ++g_allocs;
  return IBV_ALLOCATOR_USE_DEFAULT;
}
void count_free(ibv_pd*, void*, void*, uint64_t) { ++g_allocs; }

using ParentDomain = VerbsTest;

TEST_F(ParentDomain, ArgumentsAndLifetimes) {
  ibv_pd* pd = ibv_alloc_pd(ctx_);
  ASSERT_NE(pd, nullptr);
  ibv_td_init_attr ta{};
  ta.comp_mask = 1;
  errno = 0;
  EXPECT_EQ(ibv_alloc_td(ctx_, &ta), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ta.comp_mask = 0;
  ibv_td* td = ibv_alloc_td(ctx_, &ta);
  ASSERT_NE(td, nullptr);

  ibv_parent_domain_init_attr pa{};
  errno = 0;
  EXPECT_EQ(ibv_alloc_parent_domain(ctx_, &pa), nullptr) << "no PD";
  EXPECT_EQ(errno, EINVAL);
  pa.pd = pd;
  pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;  // without the functions
  errno = 0;
  EXPECT_EQ(ibv_alloc_parent_domain(ctx_, &pa), nullptr);
  EXPECT_EQ(errno, EINVAL);
  pa.comp_mask = 1u << 7;
  errno = 0;
  EXPECT_EQ(ibv_alloc_parent_domain(ctx_, &pa), nullptr);
  EXPECT_EQ(errno, EINVAL);

  pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  pa.alloc = count_alloc;
  pa.free = count_free;
  pa.td = td;
  ibv_pd* parent = ibv_alloc_parent_domain(ctx_, &pa);
  ASSERT_NE(parent, nullptr) << strerror(errno);
  EXPECT_EQ(parent->context, ctx_);
  ibv_parent_domain_init_attr pp{};
  pp.pd = parent;
  errno = 0;
  EXPECT_EQ(ibv_alloc_parent_domain(ctx_, &pp), nullptr) << "a parent of a parent";
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY) << "the parent domain extends it";
  EXPECT_EQ(ibv_dealloc_td(td), EBUSY) << "the parent domain uses it";
  EXPECT_EQ(ibv_dealloc_pd(parent), 0);
  EXPECT_EQ(ibv_dealloc_td(td), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

// Objects made through the parent domain and through its PD are in one PD:
// a QP of the parent domain (with an extended CQ that names it) sends from
// an MR of the plain PD, and the peer's MR on the parent receives.
TEST_F(ParentDomain, InterchangeableWithItsProtectionDomain) {
  g_allocs = 0;
  RcPair p;
  ASSERT_TRUE(make_rc_pair(ctx_, &p));
  ibv_parent_domain_init_attr pa{};
  pa.pd = p.a.pd;
  pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
  pa.alloc = count_alloc;
  pa.free = count_free;
  ibv_pd* parent = ibv_alloc_parent_domain(ctx_, &pa);
  ASSERT_NE(parent, nullptr);

  ibv_cq_init_attr_ex ca{};
  ca.cqe = 16;
  ca.wc_flags = IBV_WC_STANDARD_FLAGS;
  ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
  ca.parent_domain = p.a.pd;  // a plain PD is not a parent domain
  errno = 0;
  EXPECT_EQ(ibv_create_cq_ex(ctx_, &ca), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ca.parent_domain = parent;
  ibv_cq_ex* cqx = ibv_create_cq_ex(ctx_, &ca);
  ASSERT_NE(cqx, nullptr) << strerror(errno);
  ibv_cq* cq = ibv_cq_ex_to_cq(cqx);

  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(parent, &ia);
  ASSERT_NE(qp, nullptr) << strerror(errno);
  ASSERT_EQ(connect_rc(qp, p.b.qp->qp_num, gid_, RcParams{}), 0);
  ASSERT_EQ(to_state(p.b.qp, IBV_QPS_RESET), 0);
  ASSERT_EQ(connect_rc(p.b.qp, qp->qp_num, gid_, RcParams{}), 0);

  memset(p.a.at(0), 0x4e, 32);
  ibv_sge rs = p.b.sge(0, 32), ss = p.a.sge(0, 32);  // a's MR is on the plain PD
  ASSERT_EQ(post_recv(p.b.qp, 1, &rs, 1), 0);
  ASSERT_EQ(post_send(qp, 2, IBV_WR_SEND, &ss, 1), 0);
  auto wc = poll_one(cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc->status);
  wc = poll_one(p.b.recv_cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  EXPECT_EQ(p.b.buf[31], 0x4e);
  EXPECT_EQ(g_allocs, 0) << "uroce's queues are not the program's to allocate";

  EXPECT_EQ(ibv_dealloc_pd(parent), EBUSY) << "a QP was created through it";
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dealloc_pd(parent), 0);
}

}  // namespace
}  // namespace uroce::fault
