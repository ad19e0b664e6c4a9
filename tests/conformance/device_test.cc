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

}  // namespace
}  // namespace uroce::fault
