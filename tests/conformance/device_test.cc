// Device attributes rdma-core's test suite checks (pyverbs
// tests/test_device.py, verify_device_attr): what every RDMA device reports.
#include <cstring>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

using DeviceAttr = VerbsTest;

// A vendor id of 0 is refused by the suite; uroce reports rxe's 0xFFFFFF (no
// IEEE OUI), the same through ibv_query_device and ibv_query_device_ex.
TEST_F(DeviceAttr, VendorIdIsSetInBothQueries) {
  ibv_device_attr a{};
  ASSERT_EQ(ibv_query_device(ctx_, &a), 0);
  EXPECT_NE(a.vendor_id, 0u);
  EXPECT_EQ(a.vendor_id, 0xffffffu);
  ibv_device_attr_ex ex{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &ex), 0);
  EXPECT_EQ(ex.orig_attr.vendor_id, a.vendor_id);
  EXPECT_EQ(ex.orig_attr.vendor_part_id, a.vendor_part_id);
}

// The rest of verify_device_attr, so a regression shows here first.
TEST_F(DeviceAttr, LimitsTheSuiteRequires) {
  ibv_device_attr a{};
  ASSERT_EQ(ibv_query_device(ctx_, &a), 0);
  EXPECT_NE(a.node_guid, 0u);
  EXPECT_NE(a.sys_image_guid, 0u);
  EXPECT_GT(a.max_mr_size, 4096u);
  EXPECT_GE(a.page_size_cap, 4096u);
  EXPECT_GT(a.max_qp, 0);
  EXPECT_GT(a.max_qp_wr, 0);
  EXPECT_GT(a.max_sge, 0);
  EXPECT_GT(a.max_cq, 0);
  EXPECT_GT(a.max_cqe, 0);
  EXPECT_GT(a.max_mr, 0);
  EXPECT_GT(a.max_pd, 0);
  EXPECT_GT(a.max_pkeys, 0);
}

// ibv_query_rt_values_ex reads the clock that stamps completions
// (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP), in hca_core_clock units: a
// completion stamped between two reads lies between them.
TEST_F(DeviceAttr, RealTimeValuesShareTheCompletionClock) {
  ibv_values_ex v{};
  v.comp_mask = 1u << 5;  // no such value
  EXPECT_EQ(ibv_query_rt_values_ex(ctx_, &v), EINVAL);
  v.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
  ASSERT_EQ(ibv_query_rt_values_ex(ctx_, &v), 0);
  EXPECT_EQ(v.comp_mask, uint32_t(IBV_VALUES_MASK_RAW_CLOCK));
  EXPECT_EQ(v.raw_clock.tv_sec, 0);
  const uint64_t t0 = uint64_t(v.raw_clock.tv_nsec);

  ibv_pd* pd = ibv_alloc_pd(ctx_);
  ibv_cq_init_attr_ex ca{};
  ca.cqe = 4;
  ca.wc_flags = uint64_t(IBV_WC_STANDARD_FLAGS) | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
  ibv_cq_ex* cq = ibv_create_cq_ex(ctx_, &ca);
  ASSERT_TRUE(pd && cq);
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = ibv_cq_ex_to_cq(cq);
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 2;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd, &ia);
  ASSERT_NE(qp, nullptr);
  ASSERT_EQ(to_init(qp, IBV_ACCESS_LOCAL_WRITE), 0);
  ibv_recv_wr rw{};
  ibv_recv_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_recv(qp, &rw, &bad), 0);
  ASSERT_EQ(to_state(qp, IBV_QPS_ERR), 0);  // the receive completes, flushed and stamped
  ibv_poll_cq_attr pa{};
  const int64_t deadline = now_ms() + kWaitMs;
  int r;
  while ((r = ibv_start_poll(cq, &pa)) == ENOENT && now_ms() < deadline) {
  }
  ASSERT_EQ(r, 0);
  const uint64_t ts = ibv_wc_read_completion_ts(cq);
  ibv_end_poll(cq);
  ASSERT_EQ(ibv_query_rt_values_ex(ctx_, &v), 0);
  EXPECT_LE(t0, ts);
  EXPECT_LE(ts, uint64_t(v.raw_clock.tv_nsec));
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

}  // namespace
}  // namespace uroce::fault
