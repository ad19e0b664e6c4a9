// The struct layout is the contract with binaries built against rdma-core
// v44 (research/abi.md §1): offsets, extended-context discovery, and no
// empty op slot that inline verbs could call.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

namespace {

// Offsets read from rdma-core v44's headers on x86-64 (abi-data/layout_probe.out).
static_assert(sizeof(ibv_device) == 664 && offsetof(ibv_device, ibdev_path) == 408);
static_assert(offsetof(ibv_context_ops, poll_cq) == 88 && offsetof(ibv_context_ops, post_send) == 200);
static_assert(offsetof(ibv_context, async_fd) == 268 && offsetof(ibv_context, abi_compat) == 320);
static_assert(sizeof(verbs_context) == 648 && offsetof(verbs_context, context) == 320);
static_assert(sizeof(ibv_qp_ex) == 352 && sizeof(ibv_cq_ex) == 288);

class AbiLayout : public ::testing::Test {
 protected:
  void SetUp() override {
    list_ = ibv_get_device_list(&n_);
    ASSERT_NE(list_, nullptr);
    ASSERT_GT(n_, 0);
    ctx_ = ibv_open_device(list_[0]);
    ASSERT_NE(ctx_, nullptr);
  }
  void TearDown() override {
    if (ctx_) ibv_close_device(ctx_);
    if (list_) ibv_free_device_list(list_);
  }
  int n_ = 0;
  ibv_device** list_ = nullptr;
  ibv_context* ctx_ = nullptr;
};

TEST_F(AbiLayout, DeviceHasVerbsDevicePrefix) {
  // libmlx5/libefa read the word after ibv_device as their ops pointer.
  const void* ops = *reinterpret_cast<void* const*>(reinterpret_cast<char*>(list_[0]) + sizeof(ibv_device));
  EXPECT_EQ(ops, nullptr);
  EXPECT_EQ(list_[0]->transport_type, IBV_TRANSPORT_IB);
  EXPECT_EQ(list_[0]->node_type, IBV_NODE_CA);
}

TEST_F(AbiLayout, ContextIsExtended) {
  EXPECT_EQ(ctx_->abi_compat, __VERBS_ABI_IS_EXTENDED);
  verbs_context* v = verbs_get_ctx(ctx_);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->sz, sizeof(verbs_context));
  EXPECT_GE(ctx_->async_fd, 0);
  EXPECT_GE(ctx_->num_comp_vectors, 1);
}

TEST_F(AbiLayout, NoEmptyOpSlot) {
  auto* ops = reinterpret_cast<void* const*>(&ctx_->ops);
  for (size_t i = 0; i < sizeof(ibv_context_ops) / sizeof(void*); ++i)
    EXPECT_NE(ops[i], nullptr) << "ibv_context_ops slot " << i;
  verbs_context* v = verbs_get_ctx(ctx_);
  auto* slots = reinterpret_cast<void* const*>(v);
  for (size_t off = 0; off < offsetof(verbs_context, _ABI_placeholder3); off += sizeof(void*)) {
    if (off == offsetof(verbs_context, priv)) continue;  // data, opaque to programs
    EXPECT_NE(slots[off / sizeof(void*)], nullptr) << "verbs_context slot at offset " << off;
  }
}

TEST_F(AbiLayout, UnimplementedExtendedVerbsFailCleanly) {
  ibv_counters_init_attr ca{};
  errno = 0;
  EXPECT_EQ(ibv_create_counters(ctx_, &ca), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
}

TEST_F(AbiLayout, CqAndQpLiveInsideTheirExtendedStructs) {
  ibv_pd* pd = ibv_alloc_pd(ctx_);
  ASSERT_NE(pd, nullptr);
  ibv_cq_init_attr_ex ca{};
  ca.cqe = 16;
  ca.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
  ibv_cq_ex* cqx = ibv_create_cq_ex(ctx_, &ca);
  ASSERT_NE(cqx, nullptr);
  EXPECT_NE(cqx->start_poll, nullptr);
  EXPECT_NE(cqx->read_completion_ts, nullptr);
  ibv_qp_init_attr_ex qa{};
  qa.qp_type = IBV_QPT_RC;
  qa.send_cq = ibv_cq_ex_to_cq(cqx);
  qa.recv_cq = ibv_cq_ex_to_cq(cqx);
  qa.cap = {4, 4, 1, 1, 0};
  qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  qa.pd = pd;
  qa.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
  ibv_qp* qp = ibv_create_qp_ex(ctx_, &qa);
  ASSERT_NE(qp, nullptr);
  ibv_qp_ex* qpx = ibv_qp_to_qp_ex(qp);
  ASSERT_EQ(reinterpret_cast<void*>(qpx), reinterpret_cast<void*>(qp));
  auto* wr_slots =
      reinterpret_cast<void* const*>(reinterpret_cast<char*>(qpx) + offsetof(ibv_qp_ex, wr_atomic_cmp_swp));
  for (size_t i = 0; i < (sizeof(ibv_qp_ex) - offsetof(ibv_qp_ex, wr_atomic_cmp_swp)) / sizeof(void*); ++i)
    EXPECT_NE(wr_slots[i], nullptr) << "ibv_qp_ex slot " << i;
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

}  // namespace
