// On-demand paging (IBV_ACCESS_ON_DEMAND, implicit regions, ibv_advise_mr),
// as rdma-core's test suite uses it (pyverbs tests/test_odp.py). On uroce an
// on-demand region is reached through the process's mapping as it is at
// each access, never through pages shared at registration, so a range the
// program maps anew after registering is what the NIC sees.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

constexpr unsigned kOdp = IBV_ACCESS_ON_DEMAND | kAllRemote;

class Odp : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    ASSERT_TRUE(make_rc_pair(ctx_, &p_));
  }
  /// One signaled WR on a's QP; its completion's status.
  ibv_wc_status run(ibv_wr_opcode op, ibv_sge* s, uint64_t raddr = 0, uint32_t rkey = 0) {
    if (post_send(p_.a.qp, 7, op, s, 1, raddr, rkey) != 0) return IBV_WC_GENERAL_ERR;
    auto wc = poll_one(p_.a.send_cq);
    return wc ? wc->status : IBV_WC_GENERAL_ERR;
  }
  RcPair p_;
};

TEST_F(Odp, CapabilitiesCoverEveryTransportAndImplicitRegions) {
  ibv_device_attr_ex ex{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &ex), 0);
  EXPECT_EQ(ex.odp_caps.general_caps, uint64_t(IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT));
  const uint32_t rc = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
                      IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
  EXPECT_EQ(ex.odp_caps.per_transport_caps.rc_odp_caps, rc);
  EXPECT_EQ(ex.xrc_odp_caps, rc);
  EXPECT_TRUE(ex.odp_caps.per_transport_caps.ud_odp_caps & IBV_ODP_SUPPORT_SEND);
}

// RDMA WRITE, READ and a SEND between on-demand regions.
TEST_F(Odp, TrafficBetweenOnDemandRegions) {
  std::vector<uint8_t> a(4096), b(4096);
  ibv_mr* ma = ibv_reg_mr(p_.a.pd, a.data(), a.size(), kOdp);
  ibv_mr* mb = ibv_reg_mr(p_.b.pd, b.data(), b.size(), kOdp);
  ASSERT_TRUE(ma && mb) << strerror(errno);
  for (size_t i = 0; i < a.size(); ++i) a[i] = uint8_t(i * 3);
  ibv_sge s{reinterpret_cast<uint64_t>(a.data()), 1024, ma->lkey};
  EXPECT_EQ(run(IBV_WR_RDMA_WRITE, &s, reinterpret_cast<uint64_t>(b.data()), mb->rkey), IBV_WC_SUCCESS);
  EXPECT_EQ(memcmp(a.data(), b.data(), 1024), 0);
  b[2000] = 0x5a;
  ibv_sge r{reinterpret_cast<uint64_t>(a.data()) + 2000, 8, ma->lkey};
  EXPECT_EQ(run(IBV_WR_RDMA_READ, &r, reinterpret_cast<uint64_t>(b.data()) + 2000, mb->rkey), IBV_WC_SUCCESS);
  EXPECT_EQ(a[2000], 0x5a);
  ibv_sge rs{reinterpret_cast<uint64_t>(b.data()) + 3000, 64, mb->lkey};
  ASSERT_EQ(post_recv(p_.b.qp, 9, &rs, 1), 0);
  ibv_sge ss{reinterpret_cast<uint64_t>(a.data()), 64, ma->lkey};
  EXPECT_EQ(run(IBV_WR_SEND, &ss), IBV_WC_SUCCESS);
  auto wc = poll_one(p_.b.recv_cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  EXPECT_EQ(memcmp(a.data(), b.data() + 3000, 64), 0);
  EXPECT_EQ(ibv_dereg_mr(ma), 0);
  EXPECT_EQ(ibv_dereg_mr(mb), 0);
}

// What ODP promises: the region follows the process's mapping. The page is
// mapped anew (fresh anonymous memory) after registration; an RDMA READ
// through the old rkey returns what the new page holds.
TEST_F(Odp, ARegionFollowsTheMappingAfterRegistration) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  void* m = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  memset(m, 0x11, page);
  ibv_mr* mb = ibv_reg_mr(p_.b.pd, m, page, kOdp);
  ASSERT_NE(mb, nullptr) << strerror(errno);
  ASSERT_EQ(mmap(m, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), m);
  memset(m, 0x22, page);
  ibv_sge r = p_.a.sge(0, 64);
  EXPECT_EQ(run(IBV_WR_RDMA_READ, &r, reinterpret_cast<uint64_t>(m), mb->rkey), IBV_WC_SUCCESS);
  EXPECT_EQ(p_.a.buf[0], 0x22);
  EXPECT_EQ(p_.a.buf[63], 0x22);
  EXPECT_EQ(ibv_dereg_mr(mb), 0);
  munmap(m, page);
}

// An implicit region (NULL, SIZE_MAX) covers any buffer of the process for
// its own work requests; remote access to it is not offered.
TEST_F(Odp, ImplicitRegionCoversAnyLocalBuffer) {
  ibv_mr* im = ibv_reg_mr(p_.a.pd, nullptr, SIZE_MAX, IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(im, nullptr) << strerror(errno);
  EXPECT_EQ(im->addr, nullptr);
  EXPECT_EQ(im->length, SIZE_MAX);
  std::vector<uint8_t> src(256, 0x3c), dst(256, 0);
  ibv_sge s{reinterpret_cast<uint64_t>(src.data()), 256, im->lkey};
  EXPECT_EQ(run(IBV_WR_RDMA_WRITE, &s, p_.b.addr(0), p_.b.mr->rkey), IBV_WC_SUCCESS);
  EXPECT_EQ(p_.b.buf[255], 0x3c);
  p_.b.buf[10] = 0x77;
  ibv_sge d{reinterpret_cast<uint64_t>(dst.data()), 16, im->lkey};
  EXPECT_EQ(run(IBV_WR_RDMA_READ, &d, p_.b.addr(0), p_.b.mr->rkey), IBV_WC_SUCCESS);
  EXPECT_EQ(dst[10], 0x77);
  EXPECT_EQ(ibv_dereg_mr(im), 0);
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(p_.a.pd, nullptr, SIZE_MAX, kOdp), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(p_.a.pd, nullptr, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL) << "only an on-demand region may be implicit";
}

TEST_F(Odp, AdvisePrefetchesAndChecksItsArguments) {
  std::vector<uint8_t> buf(3 * 4096);
  ibv_mr* odp = ibv_reg_mr(p_.a.pd, buf.data(), buf.size(), kOdp);
  ibv_mr* ro = ibv_reg_mr(p_.a.pd, buf.data(), buf.size(), IBV_ACCESS_ON_DEMAND);
  ASSERT_TRUE(odp && ro);
  ibv_sge s{reinterpret_cast<uint64_t>(buf.data()) + 100, 8000, odp->lkey};
  for (auto adv : {IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
                   IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT}) {
    EXPECT_EQ(ibv_advise_mr(p_.a.pd, adv, IBV_ADVISE_MR_FLAG_FLUSH, &s, 1), 0) << "advice " << adv;
    EXPECT_EQ(ibv_advise_mr(p_.a.pd, adv, 0, &s, 1), 0) << "advice " << adv;
  }
  EXPECT_EQ(ibv_advise_mr(p_.a.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 2, &s, 1), EINVAL);
  EXPECT_EQ(ibv_advise_mr(p_.a.pd, ibv_advise_mr_advice(9), 0, &s, 1), EOPNOTSUPP);
  EXPECT_EQ(ibv_advise_mr(p_.a.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &s, 0), EINVAL);
  ibv_sge out = s;
  out.length = 20000;
  EXPECT_EQ(ibv_advise_mr(p_.a.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &out, 1), EFAULT);
  ibv_sge bad = s;
  bad.lkey ^= 0x01000000;
  EXPECT_EQ(ibv_advise_mr(p_.a.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &bad, 1), EFAULT);
  ibv_sge pinned{p_.a.addr(0), 64, p_.a.mr->lkey};  // not on demand
  EXPECT_EQ(ibv_advise_mr(p_.a.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &pinned, 1), EINVAL);
  EXPECT_EQ(ibv_advise_mr(p_.b.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &s, 1), EPERM);
  ibv_sge rs{s.addr, 64, ro->lkey};
  EXPECT_EQ(ibv_advise_mr(p_.a.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, &rs, 1), EPERM);
  EXPECT_EQ(ibv_advise_mr(p_.a.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &rs, 1), 0);
  EXPECT_EQ(ibv_dereg_mr(odp), 0);
  EXPECT_EQ(ibv_dereg_mr(ro), 0);
}

}  // namespace
}  // namespace uroce::fault
