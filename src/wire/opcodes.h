// The BTH opcode table (IBTA Vol. 1, 9.2 and Table 38 "OpCode field"), in
// one constexpr place: which extended transport headers an opcode carries,
// what payload it may carry, and where it sits in a message. Encode and
// decode both read it; nothing else decides header layout.
#pragma once

#include <array>
#include <cstdint>

namespace uroce::wire {

/// Opcode bits 7..5: the transport service (Table 38).
enum class Service : uint8_t { kRc = 0, kUc = 1, kRd = 2, kUd = 3, kCnp = 4, kXrc = 5 };

/// Opcode bits 4..0 (Table 38); the full opcode is service << 5 | op.
enum Op : uint8_t {
  kSendFirst = 0x00,
  kSendMiddle = 0x01,
  kSendLast = 0x02,
  kSendLastImm = 0x03,
  kSendOnly = 0x04,
  kSendOnlyImm = 0x05,
  kWriteFirst = 0x06,
  kWriteMiddle = 0x07,
  kWriteLast = 0x08,
  kWriteLastImm = 0x09,
  kWriteOnly = 0x0a,
  kWriteOnlyImm = 0x0b,
  kReadRequest = 0x0c,
  kReadResponseFirst = 0x0d,
  kReadResponseMiddle = 0x0e,
  kReadResponseLast = 0x0f,
  kReadResponseOnly = 0x10,
  kAcknowledge = 0x11,
  kAtomicAcknowledge = 0x12,
  kCompareSwap = 0x13,
  kFetchAdd = 0x14,
  kSendLastInv = 0x16,
  kSendOnlyInv = 0x17,
  kAtomicWrite = 0x1d,  // IBA 1.5 (ATOMIC WRITE): RETH and 8 bytes, answered by an ACK
};

/// RoCE v2 congestion notification packet (Annex A17.9.3): opcode 0x81, a
/// BTH (BECN set, PSN 0) and 16 reserved bytes, no payload.
constexpr uint8_t kCnpOpcode = 0x81;
constexpr uint32_t kCnpReservedBytes = 16;
/// BTH byte 4 (Bth::resv8a): RoCE v2's FECN and BECN bits.
constexpr uint8_t kFecn = 0x80;
constexpr uint8_t kBecn = 0x40;

constexpr uint8_t opcode(Service s, Op op) { return uint8_t(uint8_t(s) << 5 | op); }

/// Extended transport headers, in the order they follow the BTH (9.2 / 9.3).
enum Hdr : uint16_t {
  kDeth = 1u << 0,          // 8 bytes: Q_Key, source QP (UD)
  kXrcEth = 1u << 1,        // 4 bytes: XRC SRQ number (XRC requests)
  kReth = 1u << 2,          // 16 bytes: VA, R_Key, DMA length
  kAtomicEth = 1u << 3,     // 28 bytes: VA, R_Key, swap/add, compare
  kAeth = 1u << 4,          // 4 bytes: syndrome, MSN
  kAtomicAckEth = 1u << 5,  // 8 bytes: original remote data
  kImmDt = 1u << 6,         // 4 bytes
  kIeth = 1u << 7,          // 4 bytes: R_Key to invalidate
};

constexpr uint32_t kBthBytes = 12;
constexpr uint32_t kIcrcBytes = 4;
constexpr uint32_t hdr_bytes(Hdr h) {
  switch (h) {
    case kDeth:
      return 8;
    case kReth:
      return 16;
    case kAtomicEth:
      return 28;
    case kAtomicAckEth:
      return 8;
    default:
      return 4;
  }
}
constexpr Hdr kHdrOrder[] = {kDeth, kXrcEth, kReth, kAtomicEth, kAeth, kAtomicAckEth, kImmDt, kIeth};

/// What payload a packet of this opcode carries (9.7.1, C9-21..C9-24).
enum class Payload : uint8_t {
  kNone,   // no payload
  kFull,   // FIRST / MIDDLE: exactly the path MTU
  kLast,   // LAST: 1..PMTU bytes
  kOnly,   // ONLY: 0..PMTU bytes
  kEight,  // ATOMIC WRITE: exactly 8 bytes
};

/// Position of a packet in its message, and its role.
enum OpFlag : uint16_t {
  kFirst = 1u << 0,
  kMiddle = 1u << 1,
  kLast = 1u << 2,
  kOnly = 1u << 3,
  kRequest = 1u << 4,   // requester -> responder
  kResponse = 1u << 5,  // responder -> requester (READ responses, ACKs)
  kSendOp = 1u << 6,
  kWriteOp = 1u << 7,
  kReadOp = 1u << 8,
  kAtomicOp = 1u << 9,
  kAckOp = 1u << 10,
  kHasImm = 1u << 11,
  kHasInv = 1u << 12,
  kAtomicWriteOp = 1u << 13,
};

struct OpInfo {
  const char* name;  // as IBTA Table 38 spells it
  uint16_t hdrs;     // Hdr bits, not counting the per-service DETH / XRCETH
  Payload payload;
  uint16_t flags;    // OpFlag bits
  uint8_t services;  // bit per Service that defines this op
};

namespace detail {
constexpr uint8_t kRcUcXrc =
    1u << uint8_t(Service::kRc) | 1u << uint8_t(Service::kUc) | 1u << uint8_t(Service::kXrc);
constexpr uint8_t kRcXrc = 1u << uint8_t(Service::kRc) | 1u << uint8_t(Service::kXrc);
constexpr uint8_t kAllSend = kRcUcXrc | 1u << uint8_t(Service::kUd);
constexpr std::array<OpInfo, 32> make_table() {
  std::array<OpInfo, 32> t{};
  auto set = [&t](Op op, const char* name, uint16_t hdrs, Payload p, uint16_t flags, uint8_t services) {
    t[op] = OpInfo{name, hdrs, p, flags, services};
  };
  constexpr uint16_t kReq = kRequest, kResp = kResponse;
  set(kSendFirst, "SEND_FIRST", 0, Payload::kFull, kFirst | kReq | kSendOp, kRcUcXrc);
  set(kSendMiddle, "SEND_MIDDLE", 0, Payload::kFull, kMiddle | kReq | kSendOp, kRcUcXrc);
  set(kSendLast, "SEND_LAST", 0, Payload::kLast, kLast | kReq | kSendOp, kRcUcXrc);
  set(kSendLastImm, "SEND_LAST_WITH_IMMEDIATE", kImmDt, Payload::kLast, kLast | kReq | kSendOp | kHasImm,
      kRcUcXrc);
  set(kSendOnly, "SEND_ONLY", 0, Payload::kOnly, kOnly | kReq | kSendOp, kAllSend);
  set(kSendOnlyImm, "SEND_ONLY_WITH_IMMEDIATE", kImmDt, Payload::kOnly, kOnly | kReq | kSendOp | kHasImm,
      kAllSend);
  set(kWriteFirst, "RDMA_WRITE_FIRST", kReth, Payload::kFull, kFirst | kReq | kWriteOp, kRcUcXrc);
  set(kWriteMiddle, "RDMA_WRITE_MIDDLE", 0, Payload::kFull, kMiddle | kReq | kWriteOp, kRcUcXrc);
  set(kWriteLast, "RDMA_WRITE_LAST", 0, Payload::kLast, kLast | kReq | kWriteOp, kRcUcXrc);
  set(kWriteLastImm, "RDMA_WRITE_LAST_WITH_IMMEDIATE", kImmDt, Payload::kLast,
      kLast | kReq | kWriteOp | kHasImm, kRcUcXrc);
  set(kWriteOnly, "RDMA_WRITE_ONLY", kReth, Payload::kOnly, kOnly | kReq | kWriteOp, kRcUcXrc);
  set(kWriteOnlyImm, "RDMA_WRITE_ONLY_WITH_IMMEDIATE", kReth | kImmDt, Payload::kOnly,
      kOnly | kReq | kWriteOp | kHasImm, kRcUcXrc);
  set(kReadRequest, "RDMA_READ_REQUEST", kReth, Payload::kNone, kOnly | kReq | kReadOp, kRcXrc);
  set(kReadResponseFirst, "RDMA_READ_RESPONSE_FIRST", kAeth, Payload::kFull, kFirst | kResp | kReadOp,
      kRcXrc);
  set(kReadResponseMiddle, "RDMA_READ_RESPONSE_MIDDLE", 0, Payload::kFull, kMiddle | kResp | kReadOp, kRcXrc);
  set(kReadResponseLast, "RDMA_READ_RESPONSE_LAST", kAeth, Payload::kLast, kLast | kResp | kReadOp, kRcXrc);
  set(kReadResponseOnly, "RDMA_READ_RESPONSE_ONLY", kAeth, Payload::kOnly, kOnly | kResp | kReadOp, kRcXrc);
  set(kAcknowledge, "ACKNOWLEDGE", kAeth, Payload::kNone, kOnly | kResp | kAckOp, kRcXrc);
  set(kAtomicAcknowledge, "ATOMIC_ACKNOWLEDGE", kAeth | kAtomicAckEth, Payload::kNone,
      kOnly | kResp | kAckOp | kAtomicOp, kRcXrc);
  set(kCompareSwap, "COMPARE_SWAP", kAtomicEth, Payload::kNone, kOnly | kReq | kAtomicOp, kRcXrc);
  set(kFetchAdd, "FETCH_ADD", kAtomicEth, Payload::kNone, kOnly | kReq | kAtomicOp, kRcXrc);
  set(kSendLastInv, "SEND_LAST_WITH_INVALIDATE", kIeth, Payload::kLast, kLast | kReq | kSendOp | kHasInv,
      kRcXrc);
  set(kSendOnlyInv, "SEND_ONLY_WITH_INVALIDATE", kIeth, Payload::kOnly, kOnly | kReq | kSendOp | kHasInv,
      kRcXrc);
  set(kAtomicWrite, "ATOMIC_WRITE", kReth, Payload::kEight, kOnly | kReq | kAtomicWriteOp, kRcXrc);
  return t;
}
}  // namespace detail

inline constexpr std::array<OpInfo, 32> kOpTable = detail::make_table();

/// True if this codec knows the full opcode (not RD, reserved,
/// manufacturer-specific, or CNP, which has its own path). (No pointer
/// comparisons here: GCC's sanitizers make them non-constant.)
constexpr bool op_known(uint8_t opc) {
  const uint8_t service = opc >> 5;
  if (service > uint8_t(Service::kXrc)) return false;
  const OpInfo& i = kOpTable[opc & 0x1f];
  return i.services & (1u << service);
}

/// The table entry for a full opcode, or nullptr if op_known() says no.
constexpr const OpInfo* op_info(uint8_t opc) { return op_known(opc) ? &kOpTable[opc & 0x1f] : nullptr; }

/// All extended headers a packet with this opcode carries, service headers included.
constexpr uint16_t headers_of(uint8_t opc) {
  if (!op_known(opc)) return 0;
  const OpInfo& i = kOpTable[opc & 0x1f];
  uint16_t h = i.hdrs;
  const Service s = Service(opc >> 5);
  if (s == Service::kUd) h |= kDeth;
  if (s == Service::kXrc && (i.flags & kRequest)) h |= kXrcEth;
  return h;
}

/// Bytes of BTH plus extended headers for this opcode (0 if unknown).
constexpr uint32_t header_bytes(uint8_t opc) {
  if (!op_known(opc)) return 0;
  uint32_t n = kBthBytes;
  const uint16_t h = headers_of(opc);
  for (Hdr x : kHdrOrder)
    if (h & x) n += hdr_bytes(x);
  return n;
}

static_assert(header_bytes(opcode(Service::kRc, kSendOnly)) == 12);
static_assert(header_bytes(opcode(Service::kRc, kWriteOnlyImm)) == 12 + 16 + 4);
static_assert(header_bytes(opcode(Service::kUd, kSendOnlyImm)) == 12 + 8 + 4);
static_assert(header_bytes(opcode(Service::kRc, kAtomicAcknowledge)) == 12 + 4 + 8);
static_assert(header_bytes(opcode(Service::kXrc, kCompareSwap)) == 12 + 4 + 28);
static_assert(header_bytes(opcode(Service::kXrc, kAcknowledge)) == 12 + 4);
static_assert(!op_known(opcode(Service::kUc, kReadRequest)) && !op_known(opcode(Service::kUd, kSendFirst)));

}  // namespace uroce::wire
