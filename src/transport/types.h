// The verbs vocabulary the protocol machines speak: completion statuses and
// opcodes they report, the async events they raise, the access rights they
// check. Enum values equal the libibverbs ones on purpose (the verbs layer
// static_asserts that), so conversion at the ABI boundary is a cast.
#pragma once

#include <cstdint>

namespace uroce::transport {

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
  kAtomicWrite = 9,  // IBV_WC_ATOMIC_WRITE
  kRecv = 128,
  kRecvRdmaWithImm = 129,
};
/// The bit every receive completion's opcode has (IBV_WC_RECV).
constexpr uint32_t kWcRecvBit = 128;

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

}  // namespace uroce::transport
