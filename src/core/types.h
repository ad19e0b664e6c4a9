// Core vocabulary. Enum values equal the libibverbs ones on purpose (the verbs
// layer static_asserts that), so conversion at the ABI boundary is a cast.
#pragma once

#include <cstdint>

namespace uroce::core {

/// Work completion status (IBV_WC_*).
enum class WcStatus : uint32_t {
  kSuccess = 0,
  kLocLenErr = 1,
  kLocQpOpErr = 2,
  kLocEecOpErr = 3,
  kLocProtErr = 4,
  kWrFlushErr = 5,
  kMwBindErr = 6,
  kBadRespErr = 7,
  kLocAccessErr = 8,
  kRemInvReqErr = 9,
  kRemAccessErr = 10,
  kRemOpErr = 11,
  kRetryExcErr = 12,
  kRnrRetryExcErr = 13,
  kLocRddViolErr = 14,
  kRemInvRdReqErr = 15,
  kRemAbortErr = 16,
  kInvEecnErr = 17,
  kInvEecStateErr = 18,
  kFatalErr = 19,
  kRespTimeoutErr = 20,
  kGeneralErr = 21,
};

/// Work completion opcode (IBV_WC_*).
enum class WcOpcode : uint32_t {
  kSend = 0,
  kRdmaWrite = 1,
  kRdmaRead = 2,
  kCompSwap = 3,
  kFetchAdd = 4,
  kBindMw = 5,
  kLocalInv = 6,
  kTso = 7,
  kRecv = 128,
  kRecvRdmaWithImm = 129,
};

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
  kAtomicWrite = 12,
};

/// QP state (IBV_QPS_*).
enum class QpState : uint32_t { kReset = 0, kInit, kRtr, kRts, kSqd, kSqe, kErr, kUnknown };

/// QP type (IBV_QPT_*).
enum class QpType : uint32_t { kRc = 2, kUc = 3, kUd = 4, kRawPacket = 8, kXrcSend = 9, kXrcRecv = 10 };

/// Access flags (IBV_ACCESS_*).
namespace access {
constexpr uint32_t kLocalWrite = 1u << 0;
constexpr uint32_t kRemoteWrite = 1u << 1;
constexpr uint32_t kRemoteRead = 1u << 2;
constexpr uint32_t kRemoteAtomic = 1u << 3;
constexpr uint32_t kMwBind = 1u << 4;
constexpr uint32_t kZeroBased = 1u << 5;
constexpr uint32_t kOnDemand = 1u << 6;
constexpr uint32_t kHugetlb = 1u << 7;
/// Internal, in MR-table entries only: the entry is a memory window (IBA
/// 10.6.7) of type 1, or of type 2 (bound to the QP in MrEntry::win_qpn).
constexpr uint32_t kWindow1 = 1u << 8;
constexpr uint32_t kWindow2 = 1u << 9;
constexpr uint32_t kWindow = kWindow1 | kWindow2;
constexpr uint32_t kRelaxedOrdering = 1u << 20;
constexpr uint32_t kOptionalRange = 0x3ffu << 20;
}  // namespace access

/// Send flags (IBV_SEND_*).
namespace send_flags {
constexpr uint32_t kFence = 1u << 0;
constexpr uint32_t kSignaled = 1u << 1;
constexpr uint32_t kSolicited = 1u << 2;
constexpr uint32_t kInline = 1u << 3;
}  // namespace send_flags

/// WC flags (IBV_WC_*).
namespace wc_flags {
constexpr uint32_t kGrh = 1u << 0;
constexpr uint32_t kWithImm = 1u << 1;
constexpr uint32_t kWithInv = 1u << 3;
}  // namespace wc_flags

/// Async event types (IBV_EVENT_*).
enum class AsyncEvent : uint32_t {
  kCqErr = 0,
  kQpFatal,
  kQpReqErr,
  kQpAccessErr,
  kCommEst,
  kSqDrained,
  kPathMig,
  kPathMigErr,
  kDeviceFatal,
  kPortActive,
  kPortErr,
  kLidChange,
  kPkeyChange,
  kSmChange,
  kSrqErr,
  kSrqLimitReached,
  kQpLastWqeReached,
  kClientReregister,
  kGidChange,
  kWqFatal,
};

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
