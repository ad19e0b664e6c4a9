// Case 11: verbs uroce does not implement fail cleanly through rdma-core's
// inline wrappers: NULL (or an error code) with errno saying why -- the
// EOPNOTSUPP a provider's default op returns -- never a crash, never ENOSYS.
// The context stays fully usable afterwards.
//
// Rules: ibv_open_xrcd(3), ibv_create_flow(3) ("returns a
// pointer to the flow, or NULL if the request fails. In case of an error,
// errno is updated"); STYLE.md "every op slot has a default that fails cleanly"
// (rdma-core's dummy ops answer EOPNOTSUPP).

#include <cerrno>
#include <cstring>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

class Unsupported : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    EndpointOptions o;
    o.type = IBV_QPT_UD;
    ASSERT_TRUE(make_endpoint(ctx_, o, &e_));
  }
  void TearDown() override {
    // Still alive: a normal verb works after all the refused ones.
    ibv_pd* pd = ibv_alloc_pd(ctx_);
    EXPECT_NE(pd, nullptr);
    if (pd) {
      EXPECT_EQ(ibv_dealloc_pd(pd), 0);
    }
  }
  Endpoint e_;
};

#define EXPECT_FAILS_CLEANLY(expr)                                                    \
  do {                                                                                \
    errno = 0;                                                                        \
    auto* r_ = (expr);                                                                \
    int err_ = errno;                                                                 \
    EXPECT_EQ(r_, nullptr) << #expr;                                                  \
    EXPECT_NE(err_, 0) << #expr << ": errno not set";                                 \
    EXPECT_NE(err_, ENOSYS) << #expr << ": ENOSYS means a missing op, not a refusal"; \
  } while (0)

// A flow rule on a UD QP: the kernel takes it, uroce steers frames to
// RAW_PACKET QPs only (docs/raw-ethernet.md).
TEST_F(Unsupported, CreateFlowOnAUdQp) {
  struct {
    ibv_flow_attr attr;
    ibv_flow_spec_eth eth;
  } f{};  // no padding: both parts are 4-byte aligned and sized
  f.attr.type = IBV_FLOW_ATTR_NORMAL;
  f.attr.size = sizeof(f);
  f.attr.num_of_specs = 1;
  f.attr.port = 1;
  f.eth.type = IBV_FLOW_SPEC_ETH;
  f.eth.size = sizeof(f.eth);
  memset(f.eth.mask.dst_mac, 0xff, 6);
  EXPECT_FAILS_CLEANLY(ibv_create_flow(e_.qp, &f.attr));
}

TEST_F(Unsupported, OtherExtensionVerbs) {
  ibv_counters_init_attr ca{};
  EXPECT_FAILS_CLEANLY(ibv_create_counters(ctx_, &ca));
  EXPECT_FAILS_CLEANLY(ibv_alloc_null_mr(e_.pd));
}

TEST_F(Unsupported, XrcTargetWithoutDomain) {
  // An XRC target QP needs its XRC domain (only ibv_create_qp_ex can name it).
  // (RAW_PACKET QPs are offered: tests/conformance/raw_test.cc.)
  for (ibv_qp_type t : {IBV_QPT_XRC_RECV}) {
    ibv_qp_init_attr ia{};
    ia.send_cq = e_.send_cq;
    ia.recv_cq = e_.recv_cq;
    ia.qp_type = t;
    ia.cap.max_send_wr = 1;
    ia.cap.max_recv_wr = 1;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    SCOPED_TRACE(::testing::Message() << "qp_type " << t);
    EXPECT_FAILS_CLEANLY(ibv_create_qp(e_.pd, &ia));
  }
}

}  // namespace
}  // namespace uroce::fault
