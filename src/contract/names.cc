#include "contract/names.h"

#include <array>
#include <cstddef>

namespace uroce::core {

const char* wr_opcode_name(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite:
      return "RDMA_WRITE";
    case WrOpcode::kRdmaWriteWithImm:
      return "RDMA_WRITE_WITH_IMM";
    case WrOpcode::kSend:
      return "SEND";
    case WrOpcode::kSendWithImm:
      return "SEND_WITH_IMM";
    case WrOpcode::kRdmaRead:
      return "RDMA_READ";
    case WrOpcode::kAtomicCmpAndSwp:
      return "ATOMIC_CMP_AND_SWP";
    case WrOpcode::kAtomicFetchAndAdd:
      return "ATOMIC_FETCH_AND_ADD";
    case WrOpcode::kLocalInv:
      return "LOCAL_INV";
    case WrOpcode::kBindMw:
      return "BIND_MW";
    case WrOpcode::kSendWithInv:
      return "SEND_WITH_INV";
    case WrOpcode::kAtomicWrite:
      return "ATOMIC_WRITE";
    default:
      return "?";
  }
}

const char* wc_opcode_name(WcOpcode op) {
  switch (op) {
    case WcOpcode::kSend:
      return "SEND";
    case WcOpcode::kRdmaWrite:
      return "RDMA_WRITE";
    case WcOpcode::kRdmaRead:
      return "RDMA_READ";
    case WcOpcode::kCompSwap:
      return "COMP_SWAP";
    case WcOpcode::kFetchAdd:
      return "FETCH_ADD";
    case WcOpcode::kBindMw:
      return "BIND_MW";
    case WcOpcode::kLocalInv:
      return "LOCAL_INV";
    case WcOpcode::kAtomicWrite:
      return "ATOMIC_WRITE";
    case WcOpcode::kRecv:
      return "RECV";
    case WcOpcode::kRecvRdmaWithImm:
      return "RECV_RDMA_WITH_IMM";
    default:
      return "?";
  }
}

namespace {

// The text of each ibv_wc_status, by value (IBV_WC_SUCCESS .. IBV_WC_TM_RNDV_INCOMPLETE).
constexpr std::array<const char*, 24> kWcStatusText = {
    "success",                            // IBV_WC_SUCCESS
    "local length error",                 // IBV_WC_LOC_LEN_ERR
    "local QP operation error",           // IBV_WC_LOC_QP_OP_ERR
    "local EE context operation error",   // IBV_WC_LOC_EEC_OP_ERR
    "local protection error",             // IBV_WC_LOC_PROT_ERR
    "Work Request Flushed Error",         // IBV_WC_WR_FLUSH_ERR
    "memory management operation error",  // IBV_WC_MW_BIND_ERR
    "bad response error",                 // IBV_WC_BAD_RESP_ERR
    "local access error",                 // IBV_WC_LOC_ACCESS_ERR
    "remote invalid request error",       // IBV_WC_REM_INV_REQ_ERR
    "remote access error",                // IBV_WC_REM_ACCESS_ERR
    "remote operation error",             // IBV_WC_REM_OP_ERR
    "transport retry counter exceeded",   // IBV_WC_RETRY_EXC_ERR
    "RNR retry counter exceeded",         // IBV_WC_RNR_RETRY_EXC_ERR
    "local RDD violation error",          // IBV_WC_LOC_RDD_VIOL_ERR
    "remote invalid RD request",          // IBV_WC_REM_INV_RD_REQ_ERR
    "aborted error",                      // IBV_WC_REM_ABORT_ERR
    "invalid EE context number",          // IBV_WC_INV_EECN_ERR
    "invalid EE context state",           // IBV_WC_INV_EEC_STATE_ERR
    "fatal error",                        // IBV_WC_FATAL_ERR
    "response timeout error",             // IBV_WC_RESP_TIMEOUT_ERR
    "general error",                      // IBV_WC_GENERAL_ERR
    "TM error",                           // IBV_WC_TM_ERR
    "TM software rendezvous",             // IBV_WC_TM_RNDV_INCOMPLETE
};

// std::array zero-fills missing initializers: a short list is an error.
constexpr bool all_named() {
  for (const char* name : kWcStatusText)
    if (name == nullptr) return false;
  return true;
}
static_assert(all_named());
static_assert(uint32_t(WcStatus::kGeneralErr) == 21, "WcStatus follows enum ibv_wc_status");

}  // namespace

const char* wc_status_str(uint32_t status) {
  return status < kWcStatusText.size() ? kWcStatusText[status] : "unknown";
}

const char* qp_type_name(QpType t) {
  switch (t) {
    case QpType::kRc:
      return "RC";
    case QpType::kUc:
      return "UC";
    case QpType::kUd:
      return "UD";
    case QpType::kRawPacket:
      return "RAW_PACKET";
    case QpType::kXrcSend:
      return "XRC_SEND";
    case QpType::kXrcRecv:
      return "XRC_RECV";
  }
  return "?";
}

const char* qp_state_name(QpState s) {
  static const char* kNames[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR", "UNKNOWN"};
  return uint32_t(s) <= 7 ? kNames[uint32_t(s)] : "?";
}

const char* qp_link_name(uint32_t link) {
  switch (QpLink(link)) {
    case QpLink::kShm:
      return "shm";
    case QpLink::kUdp:
      return "udp";
    case QpLink::kXdp:
      return "xdp";
  }
  return "?";
}

}  // namespace uroce::core
