#include "core/qp_state.h"

namespace uroce::core {
namespace {

using namespace qp_attr;

struct Rule {
  uint32_t req;
  uint32_t opt;
  bool valid;
};

enum Kind { kUdK = 0, kUcK = 1, kRcK = 2, kXrcIniK = 3, kXrcTgtK = 4, kRawK = 5 };

Kind kind_of(QpType t) {
  switch (t) {
    case QpType::kUd:
      return kUdK;
    case QpType::kUc:
      return kUcK;
    case QpType::kXrcSend:
      return kXrcIniK;
    case QpType::kXrcRecv:
      return kXrcTgtK;
    case QpType::kRawPacket:
      return kRawK;
    default:
      return kRcK;
  }
}

// IBA vol. 1 table 91 (QP state transition properties). XRC (IBA 11.5 / the
// XRC annex) follows RC, except that an initiator QP, which never responds,
// needs no responder attributes at RTR, and a target QP, which never
// requests, needs no requester retry attributes at RTS.
// RAW_PACKET (ibv_modify_qp(3)): INIT = STATE, PORT; RTR = STATE; RTS =
// STATE, and RATE_LIMIT may come with RTR -> RTS and RTS -> RTS (as the
// kernel's table has it). An address vector at RTR carries only a service level (perftest's
// --raw_qos).
Rule raw_rule(QpState cur, QpState next) {
  if (next == QpState::kReset || next == QpState::kErr) return {0, 0, cur != QpState::kUnknown};
  if (cur == QpState::kReset && next == QpState::kInit) return {kPort, 0, true};
  if (cur == QpState::kInit && next == QpState::kInit) return {0, kPort, true};
  if (cur == QpState::kInit && next == QpState::kRtr) return {0, kAv, true};
  if ((cur == QpState::kRtr || cur == QpState::kRts) && next == QpState::kRts)
    return {0, kCurState | kRateLimit, true};  // packet pacing (net/raw_engine.h)
  if ((cur == QpState::kSqd || cur == QpState::kSqe) && next == QpState::kRts) return {0, kCurState, true};
  if (cur == QpState::kRts && next == QpState::kSqd) return {0, kEnSqdAsyncNotify, true};
  return {0, 0, false};
}

Rule rule(Kind k, QpState cur, QpState next) {
  if (k == kRawK) return raw_rule(cur, next);
  const bool ud = k == kUdK, uc = k == kUcK || (k == kXrcIniK && cur == QpState::kInit);
  if (next == QpState::kReset || next == QpState::kErr) {
    if (cur == QpState::kUnknown) return {0, 0, false};
    return {0, 0, true};
  }
  switch (cur) {
    case QpState::kReset:
      if (next == QpState::kInit)
        return {ud ? (kPkeyIndex | kPort | kQkey) : (kPkeyIndex | kPort | kAccessFlags), 0, true};
      break;
    case QpState::kInit:
      if (next == QpState::kInit)
        return {0, ud ? (kPkeyIndex | kPort | kQkey) : (kPkeyIndex | kPort | kAccessFlags), true};
      if (next == QpState::kRtr) {
        if (ud) return {0, kPkeyIndex | kQkey, true};
        if (uc) return {kAv | kPathMtu | kDestQpn | kRqPsn, kAltPath | kAccessFlags | kPkeyIndex, true};
        return {kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer,
                kAltPath | kAccessFlags | kPkeyIndex, true};
      }
      break;
    case QpState::kRtr:
      if (next == QpState::kRts) {
        if (ud) return {kSqPsn, kCurState | kQkey | kRateLimit, true};
        if (uc) return {kSqPsn, kCurState | kAltPath | kAccessFlags | kPathMigState | kRateLimit, true};
        if (k == kXrcTgtK)
          return {kTimeout | kSqPsn, kCurState | kAltPath | kAccessFlags | kMinRnrTimer | kPathMigState,
                  true};
        return {kTimeout | kRetryCnt | kRnrRetry | kSqPsn | kMaxQpRdAtomic,
                kCurState | kAltPath | kAccessFlags | kMinRnrTimer | kPathMigState | kRateLimit, true};
      }
      break;
    case QpState::kRts:
      if (next == QpState::kRts) {
        if (ud) return {0, kCurState | kQkey | kRateLimit, true};
        if (uc) return {0, kCurState | kAccessFlags | kAltPath | kPathMigState | kRateLimit, true};
        return {0, kCurState | kAccessFlags | kAltPath | kPathMigState | kMinRnrTimer | kRateLimit, true};
      }
      if (next == QpState::kSqd) return {0, kEnSqdAsyncNotify, true};
      break;
    case QpState::kSqd:
      if (next == QpState::kRts) {
        if (ud) return {0, kCurState | kQkey, true};
        if (uc) return {0, kCurState | kAltPath | kAccessFlags | kPathMigState, true};
        return {0, kCurState | kAltPath | kAccessFlags | kMinRnrTimer | kPathMigState, true};
      }
      if (next == QpState::kSqd) {
        if (ud) return {0, kPkeyIndex | kQkey, true};
        if (uc) return {0, kAv | kAltPath | kAccessFlags | kPkeyIndex | kPathMigState, true};
        return {0,
                kPort | kAv | kTimeout | kRetryCnt | kRnrRetry | kMaxQpRdAtomic | kMaxDestRdAtomic |
                    kAltPath | kAccessFlags | kPkeyIndex | kMinRnrTimer | kPathMigState,
                true};
      }
      break;
    case QpState::kSqe:
      if (next == QpState::kRts) return {0, ud ? (kCurState | kQkey) : (kCurState | kAccessFlags), true};
      break;
    case QpState::kErr:
    default:
      break;
  }
  return {0, 0, false};
}

}  // namespace

bool modify_is_ok(QpType type, QpState cur, QpState next, uint32_t mask) {
  if (uint32_t(cur) > uint32_t(QpState::kErr) || uint32_t(next) > uint32_t(QpState::kErr)) return false;
  Rule r = rule(kind_of(type), cur, next);
  if (!r.valid) return false;
  uint32_t m = mask & ~kState;
  if ((m & r.req) != r.req) return false;
  if (m & ~(r.req | r.opt)) return false;
  return true;
}

}  // namespace uroce::core
