// Segmentation and reassembly rules of RC and UC on a packet link (IBA Vol. 1
// 9.7.1, 9.7.2): how a message becomes FIRST/MIDDLE/LAST/ONLY packets of at
// most the path MTU, how many PSNs it consumes, and which opcode may follow
// which at a responder. Pure; the requester, the responder (READ responses)
// and the tests share it.
#pragma once

#include <cstdint>

#include "wire/opcodes.h"

namespace uroce::transport {

/// What a message is, as far as its packets are concerned.
enum class MsgKind : uint8_t {
  kSend,
  kSendImm,
  kSendInv,
  kWrite,
  kWriteImm,
  kReadRequest,
  kReadResponse,
  kCompareSwap,
  kFetchAdd,
  kAtomicWrite,  // IBA 1.5: 8 bytes stored at once at the target
  // Local operations (BIND_MW, LOCAL_INV): work requests that send nothing
  // but complete in send-queue order.
  kBindMw,
  kLocalInv,
};

/// A local operation: no packet, no PSN.
constexpr bool is_local(MsgKind k) { return k == MsgKind::kBindMw || k == MsgKind::kLocalInv; }

/// Path MTU in bytes for an IB MTU enum (1 = 256 .. 5 = 4096); 0 if invalid.
constexpr uint32_t pmtu_bytes(uint32_t mtu_enum) {
  return mtu_enum >= 1 && mtu_enum <= 5 ? 128u << mtu_enum : 0;
}

/// Packets a message of `len` bytes takes (a zero-length message takes one;
/// a READ request, atomics: one; a local operation none).
constexpr uint32_t packets_for(MsgKind k, uint64_t len, uint32_t pmtu) {
  if (is_local(k)) return 0;
  if (k == MsgKind::kReadRequest || k == MsgKind::kCompareSwap || k == MsgKind::kFetchAdd) return 1;
  return len == 0 ? 1 : uint32_t((len + pmtu - 1) / pmtu);
}

/// PSNs the message consumes at the requester (9.7.2.1): a READ request
/// takes one per response packet it asks for.
constexpr uint32_t psns_for(MsgKind k, uint64_t len, uint32_t pmtu) {
  if (k == MsgKind::kReadRequest) return len == 0 ? 1 : uint32_t((len + pmtu - 1) / pmtu);
  return packets_for(k, len, pmtu);
}

/// One packet of a message: its opcode (Op, without the service bits) and
/// which bytes of the message it carries.
struct PacketSpan {
  wire::Op op;
  uint64_t offset;
  uint32_t len;
  bool first, last;  // carries the message's first / last byte (RETH goes on first; ImmDt, IETH on last)
};

/// The i-th (0-based) of packets_for(k, len, pmtu) packets.
PacketSpan packet_of(MsgKind k, uint64_t len, uint32_t pmtu, uint32_t i);

/// May a packet with opcode `next` (Op bits) follow `prev` in the same
/// direction of a connection (requests at a responder, READ responses at a
/// requester)? `prev` is the last packet accepted, or kNoPrev at the start.
/// (IBA 9.7.5.1.1: a FIRST or MIDDLE must be followed by a MIDDLE or LAST of
/// its kind; anything else must start a message.)
constexpr uint8_t kNoPrev = 0xff;
bool opcode_follows(uint8_t prev, uint8_t next);

/// True if `op` (Op bits) leaves a message open (FIRST or MIDDLE).
bool leaves_message_open(uint8_t op);

}  // namespace uroce::transport
