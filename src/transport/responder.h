// What a request does at its target QP on the intra-host link. The initiator
// runs this on the target's shared state, acting as the target's NIC: the
// target process is not involved (it may be busy, blocked or stopped).
#pragma once

#include <sys/uio.h>

#include <cstdint>

#include "core/peer_map.h"
#include "core/types.h"

namespace uroce::transport {

/// Outcome at the responder, as an IB responder would answer (IBA 9.7.5).
enum class Resp {
  kOk,
  kRnr,        // no receive WQE: RNR NAK (IBA 9.7.5.2.8)
  kNoAnswer,   // target gone or not in a receiving state: packet silently dropped
  kRemAccess,  // NAK remote access error
  kRemInvReq,  // NAK invalid request
  kRemOp,      // NAK remote operational error
};

struct RecvMeta {
  uint32_t src_qpn;
  uint32_t imm;  // network order
  bool has_imm;
  bool solicited;
  bool with_grh;       // UD: a 40-byte GRH precedes the payload
  const uint8_t* grh;  // 40 bytes when with_grh
  uint32_t xrc_srqn;   // XRC: the SRQ (at the target) this message names
  bool has_inv;        // SEND with Invalidate: revoke the target's window inv_rkey
  uint32_t inv_rkey;
};

struct RnrInfo {
  uint32_t rnr_timer = 0;  // responder's min_rnr_timer (IB encoding)
  uint64_t rq_tail = 0;    // RQ producer index seen, to notice new receives early
};

/// SEND / SEND_WITH_IMM: consumes a receive WQE and places `len` bytes.
Resp respond_send(const core::PeerQp& t, const iovec* src, size_t nsrc, uint64_t len, const RecvMeta& m,
                  RnrInfo* rnr);
/// RDMA WRITE (optionally WITH_IMM, which also consumes a receive WQE).
Resp respond_write(const core::PeerQp& t, const iovec* src, size_t nsrc, uint64_t len, uint64_t raddr,
                   uint32_t rkey, const RecvMeta* imm, RnrInfo* rnr, uint32_t xrc_srqn = 0);
/// RDMA READ: copies the remote range into `dst`.
Resp respond_read(const core::PeerQp& t, const iovec* dst, size_t ndst, uint64_t len, uint64_t raddr,
                  uint32_t rkey, uint32_t xrc_srqn = 0);
/// ATOMIC CMP_AND_SWP / FETCH_AND_ADD on 8 aligned bytes; *orig gets the old value.
Resp respond_atomic(const core::PeerQp& t, core::HostShm* host, bool cmp_swap, uint64_t raddr, uint32_t rkey,
                    uint64_t compare_add, uint64_t swap, uint64_t* orig, uint32_t xrc_srqn = 0);
/// The target QP's current receive-queue producer index (RNR early retry).
uint64_t target_rq_tail(const core::PeerQp& t, uint32_t xrc_srqn = 0);

}  // namespace uroce::transport
