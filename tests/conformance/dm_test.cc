// Device memory (ibv_alloc_dm, ibv_memcpy_to/from_dm, ibv_reg_dm_mr), as
// rdma-core's test suite checks it (pyverbs tests/test_device.py DMTest,
// tests/test_mr.py DeviceMemoryAPITest and DeviceMemoryTest), with mlx5's
// rules: 4-byte aligned copies inside the allocation, zero-based MRs.
#include <cerrno>
#include <cstring>
#include <vector>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

class DeviceMemory : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    ibv_device_attr_ex ex{};
    ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &ex), 0);
    max_ = ex.max_dm_size;
    ASSERT_GT(max_, 0u) << "device memory must be offered";
  }
  ibv_dm* alloc(uint64_t len, uint32_t log_align = 0) {
    ibv_alloc_dm_attr a{};
    a.length = len;
    a.log_align_req = log_align;
    return ibv_alloc_dm(ctx_, &a);
  }
  uint64_t max_ = 0;
};

TEST_F(DeviceMemory, AllocWithinTheReportedSizeAndNotBeyond) {
  for (uint32_t align = 0; align <= 6; ++align) {
    ibv_dm* dm = alloc(max_ / 2, align);
    ASSERT_NE(dm, nullptr) << "log_align " << align << ": " << strerror(errno);
    EXPECT_EQ(dm->context, ctx_);
    EXPECT_EQ(ibv_free_dm(dm), 0);
  }
  errno = 0;
  EXPECT_EQ(alloc(max_ + 1), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_alloc_dm_attr a{};
  a.length = 64;
  a.comp_mask = 1;  // no extension is known
  errno = 0;
  EXPECT_EQ(ibv_alloc_dm(ctx_, &a), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

// The device's memory runs out: what is allocated counts until it is freed.
TEST_F(DeviceMemory, AllocationsShareOneBudget) {
  ibv_dm* a = alloc(max_);
  ASSERT_NE(a, nullptr);
  errno = 0;
  EXPECT_EQ(alloc(4), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_EQ(ibv_free_dm(a), 0);
  ibv_dm* b = alloc(max_);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(ibv_free_dm(b), 0);
}

TEST_F(DeviceMemory, CopiesAreAlignedAndBounded) {
  constexpr uint64_t kLen = 100;
  ibv_dm* dm = alloc(kLen);
  ASSERT_NE(dm, nullptr);
  std::vector<uint8_t> in(kLen + 8), out(kLen + 8, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = uint8_t(i * 7 + 1);
  ASSERT_EQ(ibv_memcpy_to_dm(dm, 8, in.data(), 40), 0);
  ASSERT_EQ(ibv_memcpy_from_dm(out.data(), dm, 8, 40), 0);
  EXPECT_EQ(memcmp(in.data(), out.data(), 40), 0);
  // Unaligned offset or length: EINVAL; outside the allocation: EFAULT.
  EXPECT_EQ(ibv_memcpy_to_dm(dm, 2, in.data(), 4), EINVAL);
  EXPECT_EQ(ibv_memcpy_to_dm(dm, 4, in.data(), 6), EINVAL);
  EXPECT_EQ(ibv_memcpy_from_dm(out.data(), dm, 2, 4), EINVAL);
  EXPECT_EQ(ibv_memcpy_from_dm(out.data(), dm, 4, 6), EINVAL);
  EXPECT_EQ(ibv_memcpy_to_dm(dm, kLen + 4, in.data(), 4), EFAULT);
  EXPECT_EQ(ibv_memcpy_to_dm(dm, 0, in.data(), kLen + 4), EFAULT);
  EXPECT_EQ(ibv_memcpy_from_dm(out.data(), dm, kLen + 4, 4), EFAULT);
  EXPECT_EQ(ibv_memcpy_from_dm(out.data(), dm, 0, kLen + 4), EFAULT);
  EXPECT_EQ(ibv_free_dm(dm), 0);
}

TEST_F(DeviceMemory, RegistrationIsZeroBasedAndInside) {
  ibv_dm* dm = alloc(100);
  ASSERT_NE(dm, nullptr);
  ibv_pd* pd = ibv_alloc_pd(ctx_);
  ASSERT_NE(pd, nullptr);
  const unsigned zb = IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE;
  errno = 0;
  EXPECT_EQ(ibv_reg_dm_mr(pd, dm, 0, 100, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_reg_dm_mr(pd, dm, 0, 104, zb), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_reg_dm_mr(pd, dm, 8, 96, zb), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_mr* empty = ibv_reg_dm_mr(pd, dm, 0, 0, zb);  // allowed, as for mlx5
  ASSERT_NE(empty, nullptr) << strerror(errno);
  ibv_mr* mr = ibv_reg_dm_mr(pd, dm, 4, 96, zb);
  ASSERT_NE(mr, nullptr) << strerror(errno);
  EXPECT_EQ(mr->addr, nullptr);
  EXPECT_EQ(mr->length, 96u);
  EXPECT_EQ(ibv_free_dm(dm), EBUSY) << "MRs still map it";
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dereg_mr(empty), 0);
  EXPECT_EQ(ibv_free_dm(dm), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

// DeviceMemoryTest: a SEND from one side's device memory lands in the
// other's, and an RDMA WRITE reaches a remote device-memory MR at its
// zero-based address; both read back with ibv_memcpy_from_dm.
TEST_F(DeviceMemory, TrafficFromAndIntoDeviceMemory) {
  constexpr uint32_t kMsg = 64;
  RcPair p;
  ASSERT_TRUE(make_rc_pair(ctx_, &p));
  ibv_dm* dma = alloc(kMsg);
  ibv_dm* dmb = alloc(2 * kMsg);
  ASSERT_TRUE(dma && dmb);
  const unsigned acc = IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  ibv_mr* mra = ibv_reg_dm_mr(p.a.pd, dma, 0, kMsg, acc);
  ibv_mr* mrb = ibv_reg_dm_mr(p.b.pd, dmb, 0, 2 * kMsg, acc);
  ASSERT_TRUE(mra && mrb) << strerror(errno);
  std::vector<uint8_t> msg(kMsg), got(kMsg);
  for (uint32_t i = 0; i < kMsg; ++i) msg[i] = uint8_t(0xa0 + i);
  ASSERT_EQ(ibv_memcpy_to_dm(dma, 0, msg.data(), kMsg), 0);

  ibv_sge rs{0, kMsg, mrb->lkey}, ss{0, kMsg, mra->lkey};
  ASSERT_EQ(post_recv(p.b.qp, 1, &rs, 1), 0);
  ASSERT_EQ(post_send(p.a.qp, 2, IBV_WR_SEND, &ss, 1), 0);
  auto s = poll_one(p.a.send_cq);
  auto r = poll_one(p.b.recv_cq);
  ASSERT_TRUE(s && r);
  EXPECT_EQ(s->status, IBV_WC_SUCCESS) << ibv_wc_status_str(s->status);
  EXPECT_EQ(r->status, IBV_WC_SUCCESS) << ibv_wc_status_str(r->status);
  EXPECT_EQ(r->byte_len, kMsg);
  ASSERT_EQ(ibv_memcpy_from_dm(got.data(), dmb, 0, kMsg), 0);
  EXPECT_EQ(got, msg);

  ASSERT_EQ(post_send(p.a.qp, 3, IBV_WR_RDMA_WRITE, &ss, 1, kMsg, mrb->rkey), 0);
  s = poll_one(p.a.send_cq);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->status, IBV_WC_SUCCESS) << ibv_wc_status_str(s->status);
  ASSERT_EQ(ibv_memcpy_from_dm(got.data(), dmb, kMsg, kMsg), 0);
  EXPECT_EQ(got, msg);

  EXPECT_EQ(ibv_dereg_mr(mra), 0);
  EXPECT_EQ(ibv_dereg_mr(mrb), 0);
  EXPECT_EQ(ibv_free_dm(dma), 0);
  EXPECT_EQ(ibv_free_dm(dmb), 0);
}

}  // namespace
}  // namespace uroce::fault
