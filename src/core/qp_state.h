// The QP state machine's rules for a QP's attributes (IBA 10.3.1 / table
// "QP state transition properties"): which attributes each transition
// requires and which it allows, per QP type.
#pragma once

#include <cstdint>

#include "contract/shm_layout.h"
#include "contract/types.h"
#include "net/qp_attr.h"

namespace uroce::core {

/// Attribute mask bits (IBV_QP_* values).
namespace qp_attr {
constexpr uint32_t kState = 1u << 0;
constexpr uint32_t kCurState = 1u << 1;
constexpr uint32_t kEnSqdAsyncNotify = 1u << 2;
constexpr uint32_t kAccessFlags = 1u << 3;
constexpr uint32_t kPkeyIndex = 1u << 4;
constexpr uint32_t kPort = 1u << 5;
constexpr uint32_t kQkey = 1u << 6;
constexpr uint32_t kAv = 1u << 7;
constexpr uint32_t kPathMtu = 1u << 8;
constexpr uint32_t kTimeout = 1u << 9;
constexpr uint32_t kRetryCnt = 1u << 10;
constexpr uint32_t kRnrRetry = 1u << 11;
constexpr uint32_t kRqPsn = 1u << 12;
constexpr uint32_t kMaxQpRdAtomic = 1u << 13;
constexpr uint32_t kAltPath = 1u << 14;
constexpr uint32_t kMinRnrTimer = 1u << 15;
constexpr uint32_t kSqPsn = 1u << 16;
constexpr uint32_t kMaxDestRdAtomic = 1u << 17;
constexpr uint32_t kPathMigState = 1u << 18;
constexpr uint32_t kCap = 1u << 19;
constexpr uint32_t kDestQpn = 1u << 20;
constexpr uint32_t kRateLimit = 1u << 25;
}  // namespace qp_attr

/// Attributes a QP type ignores when a program passes them (the kernel's
/// uverbs layer drops them before checking): XRC initiators never respond,
/// XRC targets never request.
inline uint32_t ignored_attrs(QpType type) {
  using namespace qp_attr;
  if (type == QpType::kXrcSend) return kMaxDestRdAtomic | kMinRnrTimer;
  if (type == QpType::kXrcRecv) return kMaxQpRdAtomic | kRetryCnt | kRnrRetry;
  return 0;
}

/// True if moving a `type` QP from `cur` to `next` with `mask` is legal:
/// every required attribute present, nothing outside required|optional.
bool modify_is_ok(QpType type, QpState cur, QpState next, uint32_t mask);

}  // namespace uroce::core
