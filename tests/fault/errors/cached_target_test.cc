// An initiator on this host remembers the region it wrote last
// (core/shm_engine_write.cc). Whatever the target changes after a good WRITE —
// deregisters the region, re-registers it elsewhere or without remote
// write, takes remote write from its QP, leaves RTS — the next WRITE with
// the same R_Key sees it, as an HCA checks every request (IBA 9.7.5.1.3:
// NAK remote access error; ibv_rereg_mr(3)); a WRITE past the region's end
// fails although the start of the region is cached.
#include <cstring>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

constexpr uint32_t kLen = 64;

class CachedTarget : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    ASSERT_TRUE(make_rc_pair(ctx_, &p_));
  }
  /// a writes kLen bytes (a fresh pattern) at `raddr` through `rkey`: the status.
  ibv_wc_status write_to(uint64_t raddr, uint32_t rkey, uint32_t len = kLen) {
    memset(p_.a.at(0), int(0x40 + (++n_ & 0x3f)), len);
    ibv_sge s = p_.a.sge(0, len);
    if (post_send(p_.a.qp, 100 + n_, IBV_WR_RDMA_WRITE, &s, 1, raddr, rkey) != 0) return IBV_WC_GENERAL_ERR;
    auto wc = poll_one(p_.a.send_cq);
    if (!wc) return IBV_WC_GENERAL_ERR;
    EXPECT_EQ(wc->wr_id, uint64_t(100 + n_));
    return wc->status;
  }
  bool landed(const uint8_t* p) const { return memcmp(p, p_.a.buf.data(), kLen) == 0; }
  RcPair p_;
  int n_ = 0;
};

TEST_F(CachedTarget, WritesAfterTheRegionIsDeregisteredFail) {
  const uint32_t rkey = p_.b.mr->rkey;
  ASSERT_EQ(write_to(p_.b.addr(128), rkey), IBV_WC_SUCCESS);
  EXPECT_TRUE(landed(p_.b.at(128)));
  ASSERT_EQ(ibv_dereg_mr(p_.b.mr), 0);
  p_.b.mr = nullptr;
  EXPECT_EQ(write_to(p_.b.addr(128), rkey), IBV_WC_REM_ACCESS_ERR);
  EXPECT_FALSE(landed(p_.b.at(128)));
  EXPECT_EQ(query_state(p_.a.qp), IBV_QPS_ERR);
}

TEST_F(CachedTarget, ARegionReregisteredElsewhereTakesTheWritesThere) {
  ASSERT_EQ(write_to(p_.b.addr(0), p_.b.mr->rkey), IBV_WC_SUCCESS);
  std::vector<uint8_t> other(8192, 0);
  ASSERT_EQ(ibv_rereg_mr(p_.b.mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, other.data(), other.size(), 0),
            0);
  const uint32_t rkey = p_.b.mr->rkey;
  ASSERT_EQ(write_to(reinterpret_cast<uint64_t>(other.data()) + 256, rkey), IBV_WC_SUCCESS);
  EXPECT_TRUE(landed(other.data() + 256));
  // The old range is outside the region now.
  EXPECT_EQ(write_to(p_.b.addr(16384), rkey), IBV_WC_REM_ACCESS_ERR);
  EXPECT_NE(p_.b.buf[16384], p_.a.buf[0]);
  // (other goes before the fixture deregisters the region: it must not be written after.)
  ASSERT_EQ(ibv_dereg_mr(p_.b.mr), 0);
  p_.b.mr = nullptr;
}

TEST_F(CachedTarget, ARegionReregisteredWithoutRemoteWriteRefusesWrites) {
  ASSERT_EQ(write_to(p_.b.addr(0), p_.b.mr->rkey), IBV_WC_SUCCESS);
  ASSERT_EQ(ibv_rereg_mr(p_.b.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ),
            0);
  EXPECT_EQ(write_to(p_.b.addr(0), p_.b.mr->rkey), IBV_WC_REM_ACCESS_ERR);
  EXPECT_FALSE(landed(p_.b.at(0)));
}

TEST_F(CachedTarget, AQpThatNoLongerAllowsRemoteWriteRefusesWrites) {
  ASSERT_EQ(write_to(p_.b.addr(0), p_.b.mr->rkey), IBV_WC_SUCCESS);
  ibv_qp_attr attr{};
  attr.qp_access_flags = IBV_ACCESS_REMOTE_READ;
  ASSERT_EQ(ibv_modify_qp(p_.b.qp, &attr, IBV_QP_ACCESS_FLAGS), 0);
  EXPECT_EQ(write_to(p_.b.addr(0), p_.b.mr->rkey), IBV_WC_REM_ACCESS_ERR);
  EXPECT_FALSE(landed(p_.b.at(0)));
}

TEST_F(CachedTarget, AWritePastTheEndOfTheCachedRegionFails) {
  const uint64_t end = p_.b.addr(p_.b.buf.size());
  ASSERT_EQ(write_to(end - kLen, p_.b.mr->rkey), IBV_WC_SUCCESS);
  EXPECT_TRUE(landed(p_.b.at(p_.b.buf.size() - kLen)));
  EXPECT_EQ(write_to(end - kLen + 1, p_.b.mr->rkey), IBV_WC_REM_ACCESS_ERR);
}

// Two regions written in turn: each WRITE lands in the region its key names.
TEST_F(CachedTarget, WritesAlternatingBetweenTwoRegionsLandInEach) {
  std::vector<uint8_t> second(4096, 0);
  ibv_mr* mr2 = ibv_reg_mr(p_.b.pd, second.data(), second.size(), kAllRemote);
  ASSERT_NE(mr2, nullptr);
  for (int i = 0; i < 6; ++i) {
    const bool first = i % 2 == 0;
    uint8_t* dst = first ? p_.b.at(64 * i) : second.data() + 64 * i;
    ASSERT_EQ(write_to(reinterpret_cast<uint64_t>(dst), first ? p_.b.mr->rkey : mr2->rkey), IBV_WC_SUCCESS);
    EXPECT_TRUE(landed(dst)) << "write " << i;
  }
  // The second region's key with an address of the first: outside it.
  EXPECT_EQ(write_to(p_.b.addr(0), mr2->rkey), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(ibv_dereg_mr(mr2), 0);
}

// The target QP leaves RTS for ERR: a WRITE is not answered (an RC
// requester retries until retry_cnt runs out) and no byte lands.
TEST_F(CachedTarget, ATargetQpInErrorTakesNoWrites) {
  ASSERT_EQ(write_to(p_.b.addr(0), p_.b.mr->rkey), IBV_WC_SUCCESS);
  ASSERT_EQ(to_state(p_.b.qp, IBV_QPS_ERR), 0);
  EXPECT_EQ(write_to(p_.b.addr(0), p_.b.mr->rkey), IBV_WC_RETRY_EXC_ERR);
  EXPECT_FALSE(landed(p_.b.at(0)));
}

}  // namespace
}  // namespace uroce::fault
