// Address handles as rdma-core's test suite checks them (pyverbs
// tests/test_addr.py).
#include <cerrno>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

using AddressHandle = VerbsTest;

// test_create_ah_roce: on a RoCE port an AH must carry a GRH (IBA A17.4.5.1);
// the kernel refuses one without it with EINVAL for rxe and mlx5.
TEST_F(AddressHandle, RoceRefusesAnAhWithoutGrh) {
  ibv_pd* pd = ibv_alloc_pd(ctx_);
  ASSERT_NE(pd, nullptr);
  ibv_ah_attr a{};
  a.is_global = 0;
  a.port_num = 1;
  errno = 0;
  ibv_ah* ah = ibv_create_ah(pd, &a);
  EXPECT_EQ(ah, nullptr);
  EXPECT_EQ(errno, EINVAL);
  if (ah) ibv_destroy_ah(ah);
  // With its GRH the same AH is fine.
  a.is_global = 1;
  a.grh.dgid = gid_;
  a.grh.sgid_index = kGidIndex;
  a.grh.hop_limit = 1;
  ah = ibv_create_ah(pd, &a);
  ASSERT_NE(ah, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_destroy_ah(ah), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

}  // namespace
}  // namespace uroce::fault
