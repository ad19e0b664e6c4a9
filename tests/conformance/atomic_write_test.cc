// ATOMIC WRITE (IBA 1.5; IBV_WR_ATOMIC_WRITE, ibv_wr_atomic_write), as
// rdma-core's test_qp_ex_rc_atomic_write uses it: 8 bytes stored at once at
// an aligned remote address, completed as IBV_WC_ATOMIC_WRITE; a misaligned
// one ends in a remote invalid request error. Runs on the intra-host link
// (conformance_verbs_test) and over UDP (conformance_verbs_udp_test); the
// new post API's ibv_wr_atomic_write is rdma-core's own test (pyverbs_lo,
// pyverbs_netns).
#include <cerrno>
#include <cstring>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

using AtomicWrite = VerbsTest;

TEST_F(AtomicWrite, EightBytesLandAndCompleteAsAtomicWrite) {
  RcPair p;
  ASSERT_TRUE(make_rc_pair(ctx_, &p));
  const uint64_t value = 0x0123456789abcdefull;
  memcpy(p.a.at(0), &value, 8);
  memset(p.b.at(64), 0, 16);
  ibv_sge s = p.a.sge(0, 8);
  ASSERT_EQ(post_send(p.a.qp, 1, IBV_WR_ATOMIC_WRITE, &s, 1, p.b.addr(64), p.b.mr->rkey), 0);
  auto wc = poll_one(p.a.send_cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc->opcode, IBV_WC_ATOMIC_WRITE);
  uint64_t got = 0;
  memcpy(&got, p.b.at(64), 8);
  EXPECT_EQ(got, value);
  uint64_t after = 1;
  memcpy(&after, p.b.at(72), 8);
  EXPECT_EQ(after, 0u) << "nothing past the 8 bytes";
}

TEST_F(AtomicWrite, MisalignedIsARemoteInvalidRequest) {
  RcPair p;
  ASSERT_TRUE(make_rc_pair(ctx_, &p));
  ibv_sge s = p.a.sge(0, 8);
  ASSERT_EQ(post_send(p.a.qp, 1, IBV_WR_ATOMIC_WRITE, &s, 1, p.b.addr(68), p.b.mr->rkey), 0);
  auto wc = poll_one(p.a.send_cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_REM_INV_REQ_ERR);
}

TEST_F(AtomicWrite, OtherThanEightBytesIsALocalLengthError) {
  RcPair p;
  ASSERT_TRUE(make_rc_pair(ctx_, &p));
  ibv_sge s = p.a.sge(0, 16);
  ASSERT_EQ(post_send(p.a.qp, 1, IBV_WR_ATOMIC_WRITE, &s, 1, p.b.addr(64), p.b.mr->rkey), 0);
  auto wc = poll_one(p.a.send_cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_LOC_LEN_ERR);
}

}  // namespace
}  // namespace uroce::fault
