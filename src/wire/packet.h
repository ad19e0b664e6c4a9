// A RoCE v2 packet's InfiniBand part, from the BTH to the end of the payload
// (IBTA Vol. 1 ch. 9; Annex A17 for RoCE v2): decoded into plain fields,
// encoded from them. The layout comes from the opcode table (wire/opcodes.h);
// the ICRC, which also covers the IP and UDP headers, is wire/icrc.h.
// Pure: no I/O, no allocation; decode never reads outside its input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/opcodes.h"

namespace uroce::wire {

/// Base transport header (9.2, 12 bytes).
struct Bth {
  uint8_t opcode = 0;
  bool solicited = false;  // SE
  bool mig_req = false;    // M
  uint8_t pad = 0;         // PadCnt: bytes after the payload to a 4-byte boundary
  uint8_t tver = 0;        // transport header version, 0
  uint16_t pkey = 0xffff;
  uint8_t resv8a = 0;    // RoCE: FECN/BECN and reserved bits (masked out of the ICRC)
  uint32_t dest_qp = 0;  // 24 bits
  bool ack_req = false;  // A
  uint32_t psn = 0;      // 24 bits
};

/// The destination QP of every multicast packet (IBA 10.5.2.3); each QP
/// attached to the group receives it.
constexpr uint32_t kMulticastQpn = 0xffffff;

/// AETH syndrome (9.3.5, Table 43): bits 6..5 say what it is, bits 4..0 the detail.
enum class AckType : uint8_t { kAck = 0, kRnrNak = 1, kReserved = 2, kNak = 3 };
enum class NakCode : uint8_t {
  kPsnSequenceError = 0,
  kInvalidRequest = 1,
  kRemoteAccessError = 2,
  kRemoteOperationalError = 3,
  kInvalidRdRequest = 4,
};
/// Credit count that means "no end-to-end flow control" (9.7.7.2).
constexpr uint8_t kCreditsInvalid = 0x1f;

constexpr uint8_t syndrome_ack(uint8_t credits) { return credits & 0x1f; }
constexpr uint8_t syndrome_rnr_nak(uint8_t timer) { return uint8_t(1u << 5 | (timer & 0x1f)); }
constexpr uint8_t syndrome_nak(NakCode c) { return uint8_t(3u << 5 | uint8_t(c)); }
constexpr AckType ack_type(uint8_t syndrome) { return AckType((syndrome >> 5) & 3); }
constexpr uint8_t ack_value(uint8_t syndrome) { return syndrome & 0x1f; }
/// Bit 7 is reserved, and so are type 2 and NAK codes above 4 (Table 43).
constexpr bool syndrome_valid(uint8_t s) {
  return !(s & 0x80) && ack_type(s) != AckType::kReserved &&
         (ack_type(s) != AckType::kNak || ack_value(s) <= 4);
}

/// Every field a packet can carry; which ones are present follows from
/// bth.opcode (headers_of). Multi-byte values are host order here and
/// big-endian on the wire, except `imm`, which is kept as the 4 bytes the
/// wire carries (network order, as ibv_wc.imm_data holds it).
struct Packet {
  Bth bth;
  // RETH (9.3.3), or the VA / R_Key of an AtomicETH (9.3.4)
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_len = 0;
  // AtomicETH
  uint64_t swap_add = 0;
  uint64_t compare = 0;
  // AETH (9.3.5)
  uint8_t syndrome = 0;
  uint32_t msn = 0;  // 24 bits
  // AtomicAckETH (9.3.6)
  uint64_t atomic_orig = 0;
  // ImmDt (9.3.7), IETH (9.3.8)
  uint32_t imm = 0;
  uint32_t inv_rkey = 0;
  // DETH (9.3.2): UD
  uint32_t qkey = 0;
  uint32_t src_qp = 0;  // 24 bits
  // XRCETH (9.3.9): XRC requests
  uint32_t xrc_srqn = 0;  // 24 bits
  std::span<const uint8_t> payload;
  /// Not on the wire: when the link took the packet in (the kernel's receive
  /// time on the process's fast_now_ns() clock), 0 if it does not know.
  /// Round trips measured to it leave out how long the packet then waited
  /// for the process (a descheduled requester).
  uint64_t rx_ns = 0;
  /// Not on the wire: the IP header arrived marked Congestion Experienced
  /// (ECN CE, RFC 3168): a queue on the way was filling.
  bool ce = false;
};

/// A CNP to `dest_qp` (the requester QP whose packet arrived marked CE).
inline Packet cnp(uint32_t dest_qp, uint16_t pkey) {
  Packet p;
  p.bth.opcode = kCnpOpcode;
  p.bth.pkey = pkey;
  p.bth.resv8a = kBecn;
  p.bth.dest_qp = dest_qp;
  return p;
}

enum class DecodeError : uint8_t {
  kNone = 0,
  kTruncated,      // shorter than its headers + ICRC
  kUnknownOpcode,  // reserved, RD, manufacturer-specific, or not defined for its service
  kBadVersion,     // TVer != 0 (9.2.7: silently dropped)
  kBadPadding,     // headers + payload + pad not a multiple of 4, or pad with no payload
  kBadPayload,     // payload where the opcode carries none
  kBadSyndrome,    // reserved AETH syndrome
  kCnp,            // a RoCE v2 CNP (Annex A17.9.3): its BTH is decoded, there is nothing else
};
const char* to_string(DecodeError e);

/// Bytes `encode` writes for `p` (headers, payload, pad; no ICRC).
size_t encoded_size(const Packet& p);
/// Writes the BTH, the extended headers bth.opcode calls for, the payload and
/// the pad bytes (bth.pad is set from the payload length); a CNP is its BTH
/// and reserved bytes. Returns the bytes written, or 0 if `cap` is too small
/// or the opcode is unknown.
size_t encode(Packet& p, uint8_t* out, size_t cap);
/// Parses `bytes` = BTH .. ICRC (the UDP payload). On success `out->payload`
/// points into `bytes`. Checks what the packet alone can tell; the ICRC, the
/// path MTU and the transport state are the caller's.
DecodeError decode(std::span<const uint8_t> bytes, Packet* out);

}  // namespace uroce::wire
