// uroced's registry of QP numbers and its directory (contract/qp_directory.h):
// QPNs handed out in batches for a context's QP slots, each published with
// its owner and place, and taken out of the directory when freed or when the
// process goes.
#include "daemon/registry.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <set>

#include "contract/qp_directory.h"
#include "memory/segment.h"

namespace uroce::daemon {
namespace {

constexpr int kClient = 7;  // a client connection's descriptor, as uroced's loop names it
constexpr uint64_t kSegBytes = 1u << 20;

/// A context segment as the library makes one: a memfd sealed against
/// shrinking, with the segment header's magic.
int make_segment() {
  const int fd = memfd_create("registry-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0 || ftruncate(fd, kSegBytes) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) return -1;
  void* p = mmap(nullptr, sizeof(core::SegHeader), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return -1;
  static_cast<core::SegHeader*>(p)->magic = core::kSegMagic;
  munmap(p, sizeof(core::SegHeader));
  return fd;
}

const uint64_t kStride = core::Segment::block_size(sizeof(core::QpShm));
const uint64_t kFirst = 64 * 1024;  // past the header

TEST(Registry, ABatchOfQpnsIsPublishedWithEachSlot) {
  Registry reg;
  ASSERT_NE(reg.directory(), nullptr);
  auto ctx = reg.register_ctx(kClient, getpid(), make_segment());
  ASSERT_TRUE(ctx.is_ok());
  uint32_t qpns[8] = {};
  auto got = reg.alloc_qpns(kClient, ctx.value(), kFirst, kStride, 8, false, qpns);
  ASSERT_TRUE(got.is_ok());
  ASSERT_EQ(got.value(), 8u);
  std::set<uint32_t> distinct(qpns, qpns + 8);
  EXPECT_EQ(distinct.size(), 8u);
  for (uint32_t i = 0; i < 8; ++i) {
    const core::QpDirHit h = core::qp_dir_get(reg.directory(), qpns[i]);
    if (!h.found) continue;  // another QPN took its slot first: a miss, never a wrong answer
    EXPECT_EQ(h.ctx_id, ctx.value());
    EXPECT_EQ(h.pid, getpid());
    EXPECT_EQ(h.off, kFirst + i * kStride);
    EXPECT_FALSE(h.is_srq);
    auto r = reg.resolve_qpn(qpns[i]);
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(r->qp_off, h.off);
  }
  // A freed QPN leaves the directory; the others stay.
  reg.free_qpn(kClient, qpns[0]);
  EXPECT_FALSE(core::qp_dir_get(reg.directory(), qpns[0]).found);
  EXPECT_FALSE(reg.resolve_qpn(qpns[0]).is_ok());
  // The process goes: all of its QPNs leave.
  reg.client_gone(kClient);
  for (uint32_t i = 0; i < 8; ++i) EXPECT_FALSE(core::qp_dir_get(reg.directory(), qpns[i]).found) << i;
  EXPECT_EQ(reg.num_qpns(), 0u);
}

TEST(Registry, ABatchStopsAtTheClientsShare) {
  RegistryLimits lim;
  lim.qpns_per_client = 5;
  Registry reg(lim);
  auto ctx = reg.register_ctx(kClient, getpid(), make_segment());
  ASSERT_TRUE(ctx.is_ok());
  uint32_t qpns[8] = {};
  auto got = reg.alloc_qpns(kClient, ctx.value(), kFirst, kStride, 8, false, qpns);
  ASSERT_TRUE(got.is_ok());
  EXPECT_EQ(got.value(), 5u);
  got = reg.alloc_qpns(kClient, ctx.value(), kFirst + 8 * kStride, kStride, 8, false, qpns);
  ASSERT_FALSE(got.is_ok());
  EXPECT_EQ(got.err(), ENOMEM);
}

TEST(Registry, ABatchOutsideTheSegmentIsRefusedWhole) {
  Registry reg;
  auto ctx = reg.register_ctx(kClient, getpid(), make_segment());
  ASSERT_TRUE(ctx.is_ok());
  uint32_t qpns[8] = {};
  // The last slot would end past the segment's end.
  auto got = reg.alloc_qpns(kClient, ctx.value(), kSegBytes - 4 * kStride, kStride, 8, false, qpns);
  ASSERT_FALSE(got.is_ok());
  EXPECT_EQ(got.err(), EINVAL);
  // Slots that overlap (a stride smaller than a QP) or sit unaligned.
  EXPECT_EQ(reg.alloc_qpns(kClient, ctx.value(), kFirst, 64, 8, false, qpns).err(), EINVAL);
  EXPECT_EQ(reg.alloc_qpns(kClient, ctx.value(), kFirst + 8, kStride, 2, false, qpns).err(), EINVAL);
  // Another client's context.
  EXPECT_EQ(reg.alloc_qpns(kClient + 1, ctx.value(), kFirst, kStride, 2, false, qpns).err(), EINVAL);
  EXPECT_EQ(reg.num_qpns(), 0u);
}

}  // namespace
}  // namespace uroce::daemon
