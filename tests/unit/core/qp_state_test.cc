// IBA vol. 1 10.3.1 / table 91: required and optional attributes per QP
// state transition.
#include "core/qp_state.h"

#include <gtest/gtest.h>

#include "contract/names.h"

namespace uroce::core {
namespace {

using namespace qp_attr;

constexpr uint32_t kRcInit = kState | kPkeyIndex | kPort | kAccessFlags;
constexpr uint32_t kRcRtr = kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer;
constexpr uint32_t kRcRts = kState | kTimeout | kRetryCnt | kRnrRetry | kSqPsn | kMaxQpRdAtomic;

TEST(QpState, RcHappyPath) {
  EXPECT_TRUE(modify_is_ok(QpType::kRc, QpState::kReset, QpState::kInit, kRcInit));
  EXPECT_TRUE(modify_is_ok(QpType::kRc, QpState::kInit, QpState::kRtr, kRcRtr));
  EXPECT_TRUE(modify_is_ok(QpType::kRc, QpState::kRtr, QpState::kRts, kRcRts));
  EXPECT_TRUE(modify_is_ok(QpType::kRc, QpState::kRts, QpState::kSqd, kState));
  EXPECT_TRUE(modify_is_ok(QpType::kRc, QpState::kSqd, QpState::kRts, kState));
}

TEST(QpState, MissingRequiredAttributeIsRejected) {
  // RC RESET->INIT needs access flags; UD needs the Q_Key instead.
  EXPECT_FALSE(modify_is_ok(QpType::kRc, QpState::kReset, QpState::kInit, kRcInit & ~kAccessFlags));
  EXPECT_FALSE(modify_is_ok(QpType::kUd, QpState::kReset, QpState::kInit, kState | kPkeyIndex | kPort));
  EXPECT_TRUE(
      modify_is_ok(QpType::kUd, QpState::kReset, QpState::kInit, kState | kPkeyIndex | kPort | kQkey));
  EXPECT_FALSE(modify_is_ok(QpType::kRc, QpState::kInit, QpState::kRtr, kRcRtr & ~kMinRnrTimer));
  EXPECT_FALSE(modify_is_ok(QpType::kRc, QpState::kRtr, QpState::kRts, kRcRts & ~kTimeout));
}

TEST(QpState, UcNeedsNoRdAtomicOrTimers) {
  EXPECT_TRUE(
      modify_is_ok(QpType::kUc, QpState::kInit, QpState::kRtr, kState | kAv | kPathMtu | kDestQpn | kRqPsn));
  EXPECT_FALSE(modify_is_ok(QpType::kUc, QpState::kInit, QpState::kRtr, kRcRtr));  // extra attrs not allowed
  EXPECT_TRUE(modify_is_ok(QpType::kUc, QpState::kRtr, QpState::kRts, kState | kSqPsn));
}

TEST(QpState, AttributeOutsideTheTransitionIsRejected) {
  EXPECT_FALSE(modify_is_ok(QpType::kRc, QpState::kInit, QpState::kRtr, kRcRtr | kSqPsn));
  EXPECT_FALSE(modify_is_ok(QpType::kUd, QpState::kRtr, QpState::kRts, kState | kSqPsn | kDestQpn));
}

TEST(QpState, IllegalTransitions) {
  EXPECT_FALSE(modify_is_ok(QpType::kRc, QpState::kReset, QpState::kRtr, kRcRtr));
  EXPECT_FALSE(modify_is_ok(QpType::kRc, QpState::kInit, QpState::kRts, kRcRts));
  EXPECT_FALSE(modify_is_ok(QpType::kRc, QpState::kErr, QpState::kRts, kState));
  EXPECT_FALSE(modify_is_ok(QpType::kRc, QpState::kReset, QpState::kUnknown, kState));
}

TEST(QpState, AnyStateToResetOrError) {
  for (QpState s : {QpState::kReset, QpState::kInit, QpState::kRtr, QpState::kRts, QpState::kSqd,
                    QpState::kSqe, QpState::kErr}) {
    EXPECT_TRUE(modify_is_ok(QpType::kRc, s, QpState::kReset, kState)) << qp_state_name(s);
    EXPECT_TRUE(modify_is_ok(QpType::kRc, s, QpState::kErr, kState)) << qp_state_name(s);
  }
}

TEST(QpState, ReceivingStates) {
  EXPECT_FALSE(state_can_receive(QpState::kInit));
  EXPECT_TRUE(state_can_receive(QpState::kRtr));
  EXPECT_TRUE(state_can_receive(QpState::kRts));
  EXPECT_FALSE(state_can_receive(QpState::kErr));
}

}  // namespace
}  // namespace uroce::core

namespace uroce::core {
namespace {

using namespace qp_attr;

// The sequences rdma-core's ibv_xsrq_pingpong drives (XRC initiator and target).
TEST(QpState, XrcInitiatorAndTarget) {
  constexpr uint32_t kInit = kState | kPkeyIndex | kPort | kAccessFlags;
  EXPECT_TRUE(modify_is_ok(QpType::kXrcSend, QpState::kReset, QpState::kInit, kInit));
  EXPECT_TRUE(modify_is_ok(QpType::kXrcRecv, QpState::kReset, QpState::kInit, kInit));
  EXPECT_TRUE(modify_is_ok(QpType::kXrcSend, QpState::kInit, QpState::kRtr,
                           kState | kAv | kPathMtu | kDestQpn | kRqPsn));
  EXPECT_TRUE(modify_is_ok(QpType::kXrcRecv, QpState::kInit, QpState::kRtr,
                           kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer));
  EXPECT_FALSE(modify_is_ok(QpType::kXrcRecv, QpState::kInit, QpState::kRtr,
                            kState | kAv | kPathMtu | kDestQpn | kRqPsn));
  EXPECT_TRUE(modify_is_ok(QpType::kXrcSend, QpState::kRtr, QpState::kRts,
                           kState | kTimeout | kRetryCnt | kRnrRetry | kSqPsn | kMaxQpRdAtomic));
  EXPECT_TRUE(modify_is_ok(QpType::kXrcRecv, QpState::kRtr, QpState::kRts, kState | kTimeout | kSqPsn));
  EXPECT_FALSE(modify_is_ok(QpType::kXrcSend, QpState::kRtr, QpState::kRts, kState | kTimeout | kSqPsn));
}

}  // namespace
}  // namespace uroce::core
