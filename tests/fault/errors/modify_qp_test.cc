// Case 5: ibv_modify_qp refuses, with EINVAL and no side effect, a state
// transition the QP state machine does not have, a mask missing a required
// attribute, a mask carrying an attribute the transition does not allow, and
// an out-of-range value (port 2 on a one-port device, ...).
//
// Rules: IBA vol. 1 10.3.1 (QP state diagram) and the QP state transition
// properties table (required / optional attributes per transition and
// transport) that Modify QP (11.2.5.2) enforces; ibv_modify_qp(3) ("returns
// ... the value of errno on failure"), as the kernel's ib_modify_qp_is_ok().
#include <cstring>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

constexpr int kInitMaskRc = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
constexpr int kInitMaskUd = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
constexpr int kRtrMaskRc = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
constexpr int kRtsMaskRc = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                           IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

class ModifyQp : public VerbsTest {
 protected:
  void make(ibv_qp_type t) {
    EndpointOptions o;
    o.type = t;
    ASSERT_TRUE(make_endpoint(ctx_, o, &e_));
  }

  /// A full, valid attribute set for every transition of an RC/UD QP.
  ibv_qp_attr attrs(ibv_qp_state s) const {
    ibv_qp_attr a{};
    a.qp_state = s;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    a.qkey = 0x11111111;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = e_.qp->qp_num;  // loop to itself: any existing QPN will do
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = gid_;
    a.ah_attr.grh.sgid_index = kGidIndex;
    a.ah_attr.grh.hop_limit = 1;
    a.ah_attr.port_num = 1;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = 0;
    a.max_rd_atomic = 1;
    return a;
  }

  /// Expects EINVAL and the state unchanged.
  void expect_einval(ibv_qp_state s, int mask, ibv_qp_attr a) {
    const ibv_qp_state before = query_state(e_.qp);
    EXPECT_EQ(ibv_modify_qp(e_.qp, &a, mask), EINVAL)
        << "transition " << before << " -> " << s << " with mask 0x" << std::hex << mask;
    EXPECT_EQ(query_state(e_.qp), before) << "a refused modify changed the state";
  }
  void expect_einval(ibv_qp_state s, int mask) { expect_einval(s, mask, attrs(s)); }

  void go(ibv_qp_state s, int mask) {
    ibv_qp_attr a = attrs(s);
    ASSERT_EQ(ibv_modify_qp(e_.qp, &a, mask), 0) << "to " << s;
  }

  Endpoint e_;
};

// --- transitions the state machine does not have

TEST_F(ModifyQp, ResetToRtr) {
  make(IBV_QPT_RC);
  expect_einval(IBV_QPS_RTR, kRtrMaskRc | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  expect_einval(IBV_QPS_RTR, kRtrMaskRc);
}

TEST_F(ModifyQp, ResetToRts) {
  make(IBV_QPT_RC);
  expect_einval(IBV_QPS_RTS, kRtsMaskRc);
}

TEST_F(ModifyQp, InitToRts) {
  make(IBV_QPT_RC);
  go(IBV_QPS_INIT, kInitMaskRc);
  expect_einval(IBV_QPS_RTS, kRtsMaskRc);
  expect_einval(IBV_QPS_RTS, kRtsMaskRc | (kRtrMaskRc & ~IBV_QP_STATE));
}

TEST_F(ModifyQp, RtsBackToInitOrRtr) {
  make(IBV_QPT_RC);
  go(IBV_QPS_INIT, kInitMaskRc);
  go(IBV_QPS_RTR, kRtrMaskRc);
  go(IBV_QPS_RTS, kRtsMaskRc);
  expect_einval(IBV_QPS_INIT, kInitMaskRc);
  expect_einval(IBV_QPS_RTR, kRtrMaskRc);
}

TEST_F(ModifyQp, ErrOnlyToReset) {
  make(IBV_QPT_RC);
  go(IBV_QPS_ERR, IBV_QP_STATE);
  expect_einval(IBV_QPS_RTS, kRtsMaskRc);
  expect_einval(IBV_QPS_INIT, kInitMaskRc);
  go(IBV_QPS_RESET, IBV_QP_STATE);
  go(IBV_QPS_INIT, kInitMaskRc);
}

// --- required attributes missing

TEST_F(ModifyQp, RcResetToInitWithoutAccessFlags) {
  make(IBV_QPT_RC);
  expect_einval(IBV_QPS_INIT, kInitMaskRc & ~IBV_QP_ACCESS_FLAGS);
  go(IBV_QPS_INIT, kInitMaskRc);  // the same with the flags is fine
}

TEST_F(ModifyQp, UdResetToInitWithoutQkey) {
  make(IBV_QPT_UD);
  expect_einval(IBV_QPS_INIT, kInitMaskUd & ~IBV_QP_QKEY);
  go(IBV_QPS_INIT, kInitMaskUd);
}

TEST_F(ModifyQp, ResetToInitWithoutPort) {
  make(IBV_QPT_RC);
  expect_einval(IBV_QPS_INIT, kInitMaskRc & ~IBV_QP_PORT);
}

TEST_F(ModifyQp, RcInitToRtrWithoutMinRnrTimer) {
  make(IBV_QPT_RC);
  go(IBV_QPS_INIT, kInitMaskRc);
  expect_einval(IBV_QPS_RTR, kRtrMaskRc & ~IBV_QP_MIN_RNR_TIMER);
  go(IBV_QPS_RTR, kRtrMaskRc);
}

TEST_F(ModifyQp, RcInitToRtrWithoutEachRequiredAttribute) {
  make(IBV_QPT_RC);
  go(IBV_QPS_INIT, kInitMaskRc);
  for (int bit : {IBV_QP_AV, IBV_QP_PATH_MTU, IBV_QP_DEST_QPN, IBV_QP_RQ_PSN, IBV_QP_MAX_DEST_RD_ATOMIC,
                  IBV_QP_MIN_RNR_TIMER}) {
    SCOPED_TRACE(::testing::Message() << "without mask bit 0x" << std::hex << bit);
    expect_einval(IBV_QPS_RTR, kRtrMaskRc & ~bit);
  }
}

TEST_F(ModifyQp, RcRtrToRtsWithoutEachRequiredAttribute) {
  make(IBV_QPT_RC);
  go(IBV_QPS_INIT, kInitMaskRc);
  go(IBV_QPS_RTR, kRtrMaskRc);
  for (int bit :
       {IBV_QP_TIMEOUT, IBV_QP_RETRY_CNT, IBV_QP_RNR_RETRY, IBV_QP_SQ_PSN, IBV_QP_MAX_QP_RD_ATOMIC}) {
    SCOPED_TRACE(::testing::Message() << "without mask bit 0x" << std::hex << bit);
    expect_einval(IBV_QPS_RTS, kRtsMaskRc & ~bit);
  }
  go(IBV_QPS_RTS, kRtsMaskRc);
}

// --- attributes the transition does not allow

TEST_F(ModifyQp, SqPsnOnInitToRtr) {
  make(IBV_QPT_RC);
  go(IBV_QPS_INIT, kInitMaskRc);
  expect_einval(IBV_QPS_RTR, kRtrMaskRc | IBV_QP_SQ_PSN);
}

TEST_F(ModifyQp, RtsOnlyAttributesOnInitToRtr) {
  make(IBV_QPT_RC);
  go(IBV_QPS_INIT, kInitMaskRc);
  expect_einval(IBV_QPS_RTR, kRtrMaskRc | IBV_QP_TIMEOUT);
  expect_einval(IBV_QPS_RTR, kRtrMaskRc | IBV_QP_RETRY_CNT);
}

TEST_F(ModifyQp, QkeyOnRcResetToInit) {
  make(IBV_QPT_RC);
  expect_einval(IBV_QPS_INIT, kInitMaskRc | IBV_QP_QKEY);
}

TEST_F(ModifyQp, AccessFlagsOnUdResetToInit) {
  make(IBV_QPT_UD);
  expect_einval(IBV_QPS_INIT, kInitMaskUd | IBV_QP_ACCESS_FLAGS);
}

TEST_F(ModifyQp, PathAttributesOnResetToInit) {
  make(IBV_QPT_RC);
  expect_einval(IBV_QPS_INIT, kInitMaskRc | IBV_QP_AV | IBV_QP_DEST_QPN);
}

// --- values out of range

TEST_F(ModifyQp, Port2OnOnePortDevice) {
  make(IBV_QPT_RC);
  ibv_qp_attr a = attrs(IBV_QPS_INIT);
  a.port_num = 2;
  expect_einval(IBV_QPS_INIT, kInitMaskRc, a);
  a.port_num = 0;
  expect_einval(IBV_QPS_INIT, kInitMaskRc, a);
}

TEST_F(ModifyQp, AvPort2OnInitToRtr) {
  make(IBV_QPT_RC);
  go(IBV_QPS_INIT, kInitMaskRc);
  ibv_qp_attr a = attrs(IBV_QPS_RTR);
  a.ah_attr.port_num = 2;
  expect_einval(IBV_QPS_RTR, kRtrMaskRc, a);
}

TEST_F(ModifyQp, AvWithoutGrhOnARocePort) {
  // Expect: every port of a RoCE device needs a global route (the GID is the
  // address); without one, the kernel (rxe) and mlx5 refuse INIT -> RTR with
  // EINVAL ("Failed to modify QP to RTR" from ibv_rc_pingpong without -g).
  make(IBV_QPT_RC);
  go(IBV_QPS_INIT, kInitMaskRc);
  ibv_qp_attr a = attrs(IBV_QPS_RTR);
  a.ah_attr.is_global = 0;
  expect_einval(IBV_QPS_RTR, kRtrMaskRc, a);
  go(IBV_QPS_RTR, kRtrMaskRc);
}

TEST_F(ModifyQp, OutOfRangeTransportValues) {
  make(IBV_QPT_RC);
  go(IBV_QPS_INIT, kInitMaskRc);
  ibv_qp_attr a = attrs(IBV_QPS_RTR);
  a.min_rnr_timer = 32;  // 5-bit field
  expect_einval(IBV_QPS_RTR, kRtrMaskRc, a);
  a = attrs(IBV_QPS_RTR);
  a.path_mtu = ibv_mtu(6);
  expect_einval(IBV_QPS_RTR, kRtrMaskRc, a);
  a = attrs(IBV_QPS_RTR);
  a.ah_attr.grh.sgid_index = 200;  // no such GID
  expect_einval(IBV_QPS_RTR, kRtrMaskRc, a);
  go(IBV_QPS_RTR, kRtrMaskRc);
  a = attrs(IBV_QPS_RTS);
  a.retry_cnt = 8;  // 3-bit field
  expect_einval(IBV_QPS_RTS, kRtsMaskRc, a);
  a = attrs(IBV_QPS_RTS);
  a.rnr_retry = 8;
  expect_einval(IBV_QPS_RTS, kRtsMaskRc, a);
  a = attrs(IBV_QPS_RTS);
  a.timeout = 32;
  expect_einval(IBV_QPS_RTS, kRtsMaskRc, a);
  go(IBV_QPS_RTS, kRtsMaskRc);
}

TEST_F(ModifyQp, RefusedModifyKeepsPreviousAttributes) {
  // Nothing of a refused modify is applied (IBA 11.2.5.2: the QP is unchanged).
  make(IBV_QPT_RC);
  go(IBV_QPS_INIT, kInitMaskRc);
  ibv_qp_attr a = attrs(IBV_QPS_RTR);
  a.dest_qp_num = 0x123456;
  a.rq_psn = 0x777;
  expect_einval(IBV_QPS_RTR, kRtrMaskRc | IBV_QP_SQ_PSN, a);
  ibv_qp_attr q{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(e_.qp, &q, IBV_QP_STATE | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN, &qi), 0);
  EXPECT_EQ(q.qp_state, IBV_QPS_INIT);
  EXPECT_NE(q.dest_qp_num, 0x123456u);
  EXPECT_NE(q.rq_psn, 0x777u);
}

}  // namespace
}  // namespace uroce::fault
