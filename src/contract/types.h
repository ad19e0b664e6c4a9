// Core vocabulary: work request opcodes and flags, QP states and types,
// scatter/gather elements, memory keys. Enum values equal the libibverbs ones
// on purpose (the verbs layer static_asserts that), so conversion at the ABI
// boundary is a cast. The part the protocol machines also speak (completion
// status and opcode, async events, access rights) is defined with them, in
// transport/types.h, and named here too: core is written in it.
#pragma once

#include <cstdint>

#include "transport/timers.h"
#include "transport/types.h"

namespace uroce::core {

using transport::AsyncEvent;
using transport::kWcRecvBit;
using transport::WcOpcode;
using transport::WcStatus;
namespace access = transport::access;
using transport::ack_timeout_ns;
using transport::rnr_timer_ns;

/// Send work request opcode (IBV_WR_*).
enum class WrOpcode : uint32_t {
  kRdmaWrite = 0,
  kRdmaWriteWithImm = 1,
  kSend = 2,
  kSendWithImm = 3,
  kRdmaRead = 4,
  kAtomicCmpAndSwp = 5,
  kAtomicFetchAndAdd = 6,
  kLocalInv = 7,
  kBindMw = 8,
  kSendWithInv = 9,
  kTso = 10,
  kDriver1 = 11,
  kFlush = 14,
  kAtomicWrite = 15,  // IBV_WR_ATOMIC_WRITE
};

/// QP state (IBV_QPS_*).
enum class QpState : uint32_t { kReset = 0, kInit, kRtr, kRts, kSqd, kSqe, kErr, kUnknown };

/// QP type (IBV_QPT_*).
enum class QpType : uint32_t { kRc = 2, kUc = 3, kUd = 4, kRawPacket = 8, kXrcSend = 9, kXrcRecv = 10 };

/// Send flags (IBV_SEND_*).
namespace send_flags {
constexpr uint32_t kFence = 1u << 0;
constexpr uint32_t kSignaled = 1u << 1;
constexpr uint32_t kSolicited = 1u << 2;
constexpr uint32_t kInline = 1u << 3;
constexpr uint32_t kIpCsum = 1u << 4;  // IBV_SEND_IP_CSUM: no checksum offload here (EINVAL)
}  // namespace send_flags

/// WC flags (IBV_WC_*).
namespace wc_flags {
constexpr uint32_t kGrh = 1u << 0;
constexpr uint32_t kWithImm = 1u << 1;
constexpr uint32_t kWithInv = 1u << 3;
}  // namespace wc_flags

/// One scatter/gather element; same layout as struct ibv_sge.
struct Sge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};

/// A key is [random:8][slot:16][key:8]. The low byte is the "key" part the
/// consumer owns for a type 2 memory window (ibv_inc_rkey changes only it;
/// IBA 10.6.7), so the table slot is bits 8..23; the rest is random
/// (uroced), as is the low byte of a new key.
constexpr uint32_t kKeySlotBits = 16;
constexpr uint32_t kKeySlotShift = 8;
constexpr uint32_t kMaxMrPerContext = 1u << kKeySlotBits;
inline constexpr uint32_t key_slot(uint32_t key) { return (key >> kKeySlotShift) & (kMaxMrPerContext - 1); }
/// A key for `slot` from 16 random bits.
inline constexpr uint32_t make_key(uint32_t slot, uint16_t random) {
  return (uint32_t(random >> 8) << 24) | (slot << kKeySlotShift) | (random & 0xffu);
}

}  // namespace uroce::core
