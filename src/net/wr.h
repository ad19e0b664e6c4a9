// A send work request as a QP hands it to the engine of the link that
// carries it (net/link_engine.h), and the rules it follows whichever link
// that is: which message it becomes, which opcode its completion reports,
// and the Q_Key a UD SEND carries.
#pragma once

#include <cstdint>

#include "contract/types.h"
#include "transport/packetizer.h"

namespace uroce::core {

/// Where a packet goes (ibv_ah_attr, reduced to what RoCE uses).
struct AddressVector {
  uint8_t dgid[16];
  uint32_t flow_label;
  uint8_t sgid_index;
  uint8_t hop_limit;
  uint8_t traffic_class;
  uint8_t is_global;
  uint8_t sl;
  uint8_t port_num;
  uint16_t dlid;
};

/// What a memory-window bind asks (IBV_WR_BIND_MW, ibv_bind_mw).
struct WindowBind {
  uint32_t key;        // the window's current key
  uint32_t new_key;    // its key once bound (same slot)
  uint32_t mr_key;     // the region it covers part of (0: unbind, type 1)
  uint64_t addr, len;  // in the region's address space
  uint32_t access;     // access:: remote bits, kZeroBased (local write is ignored)
};

/// One send work request as the QP's link engine executes it.
struct SendWqe {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t flags = 0;  // send_flags::
  uint32_t imm = 0;    // network order (imm_data / invalidate_rkey)
  uint32_t num_sge = 0;
  const Sge* sge = nullptr;  // lkey-checked, or raw addresses if kInline
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  uint32_t remote_qpn = 0;            // UD
  uint32_t remote_qkey = 0;           // UD
  uint32_t xrc_srqn = 0;              // XRC: the SRQ at the target
  const AddressVector* av = nullptr;  // UD
  WindowBind bind{};                  // BIND_MW (LOCAL_INV: the key in imm)
};

constexpr bool is_atomic(WrOpcode op) {
  return op == WrOpcode::kAtomicCmpAndSwp || op == WrOpcode::kAtomicFetchAndAdd;
}

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
    case WrOpcode::kAtomicWrite:
      return transport::MsgKind::kAtomicWrite;
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
    case transport::MsgKind::kAtomicWrite:
      return WcOpcode::kAtomicWrite;
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
