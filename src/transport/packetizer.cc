#include "transport/packetizer.h"

namespace uroce::transport {

using namespace uroce::wire;

namespace {

struct Family {
  Op first, middle, last, only;
};

Family family_of(MsgKind k) {
  switch (k) {
    case MsgKind::kSend:
      return {kSendFirst, kSendMiddle, kSendLast, kSendOnly};
    case MsgKind::kSendImm:
      return {kSendFirst, kSendMiddle, kSendLastImm, kSendOnlyImm};
    case MsgKind::kSendInv:
      return {kSendFirst, kSendMiddle, kSendLastInv, kSendOnlyInv};
    case MsgKind::kWrite:
      return {kWriteFirst, kWriteMiddle, kWriteLast, kWriteOnly};
    case MsgKind::kWriteImm:
      return {kWriteFirst, kWriteMiddle, kWriteLastImm, kWriteOnlyImm};
    case MsgKind::kReadResponse:
      return {kReadResponseFirst, kReadResponseMiddle, kReadResponseLast, kReadResponseOnly};
    case MsgKind::kReadRequest:
      return {kReadRequest, kReadRequest, kReadRequest, kReadRequest};
    case MsgKind::kCompareSwap:
      return {kCompareSwap, kCompareSwap, kCompareSwap, kCompareSwap};
    case MsgKind::kFetchAdd:
      return {kFetchAdd, kFetchAdd, kFetchAdd, kFetchAdd};
    case MsgKind::kAtomicWrite:
      return {kAtomicWrite, kAtomicWrite, kAtomicWrite, kAtomicWrite};
    case MsgKind::kBindMw:
    case MsgKind::kLocalInv:
      break;  // no packets
  }
  return {kSendFirst, kSendMiddle, kSendLast, kSendOnly};
}

/// 0: SEND family, 1: WRITE family, 2: READ response family, -1: other.
int family_index(uint8_t op) {
  if (op <= kSendOnlyImm || op == kSendLastInv || op == kSendOnlyInv) return 0;
  if (op >= kWriteFirst && op <= kWriteOnlyImm) return 1;
  if (op >= kReadResponseFirst && op <= kReadResponseOnly) return 2;
  return -1;
}

}  // namespace

PacketSpan packet_of(MsgKind k, uint64_t len, uint32_t pmtu, uint32_t i) {
  const Family f = family_of(k);
  const uint32_t n = packets_for(k, len, pmtu);
  PacketSpan s;
  s.first = i == 0;
  s.last = i + 1 == n;
  if (k == MsgKind::kReadRequest || k == MsgKind::kCompareSwap || k == MsgKind::kFetchAdd) {
    s.op = f.only;
    s.offset = 0;
    s.len = 0;
    return s;
  }
  s.op = n == 1 ? f.only : s.first ? f.first : s.last ? f.last : f.middle;
  s.offset = uint64_t(i) * pmtu;
  s.len = uint32_t(s.last ? len - s.offset : pmtu);
  return s;
}

bool leaves_message_open(uint8_t op) {
  return op == kSendFirst || op == kSendMiddle || op == kWriteFirst || op == kWriteMiddle ||
         op == kReadResponseFirst || op == kReadResponseMiddle;
}

bool opcode_follows(uint8_t prev, uint8_t next) {
  const bool continues = next == kSendMiddle || next == kSendLast || next == kSendLastImm ||
                         next == kSendLastInv || next == kWriteMiddle || next == kWriteLast ||
                         next == kWriteLastImm || next == kReadResponseMiddle || next == kReadResponseLast;
  if (prev == kNoPrev || !leaves_message_open(prev)) return !continues;
  return continues && family_index(prev) == family_index(next);
}

}  // namespace uroce::transport
