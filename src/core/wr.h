// The rules a send work request follows whichever link carries it: which
// message it becomes, which opcode its completion reports, and the Q_Key a
// UD SEND carries.
#pragma once

#include <cstdint>

#include "core/types.h"
#include "transport/packetizer.h"

namespace uroce::core {

/// The message a send WR opcode becomes (BIND_MW and LOCAL_INV: local operations).
constexpr transport::MsgKind msg_kind_of(WrOpcode op) {
  switch (op) {
    case WrOpcode::kSendWithImm:
      return transport::MsgKind::kSendImm;
    case WrOpcode::kSendWithInv:
      return transport::MsgKind::kSendInv;
    case WrOpcode::kRdmaWrite:
      return transport::MsgKind::kWrite;
    case WrOpcode::kRdmaWriteWithImm:
      return transport::MsgKind::kWriteImm;
    case WrOpcode::kRdmaRead:
      return transport::MsgKind::kReadRequest;
    case WrOpcode::kAtomicCmpAndSwp:
      return transport::MsgKind::kCompareSwap;
    case WrOpcode::kAtomicFetchAndAdd:
      return transport::MsgKind::kFetchAdd;
    case WrOpcode::kBindMw:
      return transport::MsgKind::kBindMw;
    case WrOpcode::kLocalInv:
      return transport::MsgKind::kLocalInv;
    default:
      return transport::MsgKind::kSend;
  }
}

/// The opcode of a send completion (IBV_WC_*): every SEND flavour completes
/// as SEND, both WRITE flavours as RDMA_WRITE.
constexpr WcOpcode wc_opcode_of(transport::MsgKind k) {
  switch (k) {
    case transport::MsgKind::kWrite:
    case transport::MsgKind::kWriteImm:
      return WcOpcode::kRdmaWrite;
    case transport::MsgKind::kReadRequest:
      return WcOpcode::kRdmaRead;
    case transport::MsgKind::kCompareSwap:
      return WcOpcode::kCompSwap;
    case transport::MsgKind::kFetchAdd:
      return WcOpcode::kFetchAdd;
    case transport::MsgKind::kBindMw:
      return WcOpcode::kBindMw;
    case transport::MsgKind::kLocalInv:
      return WcOpcode::kLocalInv;
    default:
      return WcOpcode::kSend;
  }
}
constexpr WcOpcode wc_opcode_of(WrOpcode op) { return wc_opcode_of(msg_kind_of(op)); }

/// The Q_Key a UD SEND carries: the WR's, unless its high bit is set, which
/// means "the sending QP's own Q_Key" (IBA Vol. 1 10.2.5).
constexpr uint32_t ud_send_qkey(uint32_t wr_qkey, uint32_t qp_qkey) {
  return (wr_qkey & 0x80000000u) ? qp_qkey : wr_qkey;
}

}  // namespace uroce::core
