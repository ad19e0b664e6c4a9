// What a request does at its target QP, acting on the QP's shared state
// (its receive queue, CQ, MR table and process) as its NIC would, whichever
// link brought it. The intra-host link runs these in the initiator's process
// (core/qp_send.cc): the target process is not involved (it may be busy,
// blocked or stopped). The network link runs them in the process that
// received the packet (net/net_qp.cc; net/ud_forward.cc for a UD datagram
// that names another process's QP).
#pragma once

#include <sys/uio.h>

#include <cstdint>

#include "contract/types.h"
#include "link/shm_link.h"
#include "memory/cq_ring.h"
#include "memory/peer_map.h"
#include "memory/rq_ring.h"

namespace uroce::core {

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
Resp respond_send(const PeerQp& t, const iovec* src, size_t nsrc, uint64_t len, const RecvMeta& m,
                  RnrInfo* rnr);
/// RDMA WRITE (optionally WITH_IMM, which also consumes a receive WQE).
Resp respond_write(const PeerQp& t, const iovec* src, size_t nsrc, uint64_t len, uint64_t raddr,
                   uint32_t rkey, const RecvMeta* imm, RnrInfo* rnr, uint32_t xrc_srqn = 0);
/// RDMA READ: copies the remote range into `dst`.
Resp respond_read(const PeerQp& t, const iovec* dst, size_t ndst, uint64_t len, uint64_t raddr, uint32_t rkey,
                  uint32_t xrc_srqn = 0);
/// An 8-byte atomic at raddr (aligned): CMP_AND_SWP and FETCH_AND_ADD need
/// remote atomic access and return the old value in *orig; ATOMIC WRITE
/// (IBA 1.5, link::AtomicOp::kStore of `swap`) needs remote write access.
/// All three are atomic against each other (the host's stripe locks).
Resp respond_atomic(const PeerQp& t, HostShm* host, link::AtomicOp op, uint64_t raddr, uint32_t rkey,
                    uint64_t compare_add, uint64_t swap, uint64_t* orig, uint32_t xrc_srqn = 0);
/// The target QP's current receive-queue producer index (RNR early retry).
uint64_t target_rq_tail(const PeerQp& t, uint32_t xrc_srqn = 0);

/// Where a request's receive-side effects go: the target QP's own receive
/// queue, CQ, PD and process, or, for an XRC target QP, those of the XRC SRQ
/// the message names (IBA 9.8.2), which may live in another process.
struct Rx {
  PeerSegment* seg;
  RqRing* rq;  // null for a QP without a receive queue
  CqRing* cq;
  uint32_t pd_id;
  uint32_t qpn;  // the receiving QP (a type 2 window answers to the QP it was bound through)
  uint64_t* rq_tail_seen = nullptr;  // the requester's copies (see PeerQp), when they apply
  uint64_t* cq_head_seen = nullptr;
  MrCache* mr_cache = nullptr;
};

/// The rest of respond_send once the receive `r` of `x` is claimed: checks
/// its scatter list, places the message and pushes the completion.
Resp deliver_send(const PeerQp& t, const Rx& x, const ClaimedRecv& r, const iovec* src, size_t nsrc,
                  uint64_t len, const RecvMeta& m);
/// rx_of for an XRC target QP: the SRQ the message names.
bool rx_of_xrc(const PeerQp& t, uint32_t xrc_srqn, Rx* rx);
/// False if an XRC message names no valid SRQ of the target QP's domain.
inline bool rx_of(const PeerQp& t, uint32_t xrc_srqn, Rx* rx) {
  if (t.qp->qp_type == uint32_t(QpType::kXrcRecv)) return rx_of_xrc(t, xrc_srqn, rx);
  rx->seg = t.seg;
  rx->rq = t.rq;
  rx->cq = t.rcq;
  rx->pd_id = t.qp->pd_id;
  rx->qpn = t.qpn;
  if (!t.qp->has_srq) rx->rq_tail_seen = &t.rq_tail_seen;  // an SRQ needs exact counts (limit event)
  rx->cq_head_seen = &t.cq_head_seen;
  rx->mr_cache = &t.mr_cache;
  return true;
}
/// Validates `key` for [addr, addr+len) with `need` access in the receiving
/// PD (a type 2 window: through the QP it was bound through); returns the
/// region's snapshot, or nullptr.
const MrView* target_mr(const Rx& x, uint32_t key, uint64_t addr, uint64_t len, uint32_t need, MrView* buf);
/// This process's address of [va, va+len) of the validated region `mr`
/// (named by `key`), or nullptr when only process_vm_* reaches it.
uint8_t* mapped(const Rx& x, const MrView& mr, uint32_t key, uint64_t va, uint64_t len);
void push_cqe(const Rx& x, const Cqe& c, bool solicited, const CqBounce* bounce = nullptr);
/// A SEND with Invalidate (IBA 10.6.7): revokes the receiver's type 2
/// window `rkey` (in its PD, bound through its QP); false if there is none.
bool revoke_window(const Rx& x, uint32_t rkey);
Cqe recv_cqe(const PeerQp& t, uint64_t wr_id, WcStatus st);
/// A responder-detected error: the target QP goes to ERR, its receive queue
/// is flushed (IBA 10.3.1.6) and its owner hears an async event.
void target_error(const PeerQp& t, AsyncEvent ev);
/// Completes every receive WQE of the QP's own receive queue (not an SRQ's)
/// with WR_FLUSH_ERR, in order (IBA 10.3.1.6: a QP in ERR).
void flush_receives(const PeerQp& t);
/// Claims a receive WQE; raises the SRQ limit event when it drains below the limit.
bool claim_recv(const PeerQp& t, const Rx& x, ClaimedRecv* r, RnrInfo* rnr);

}  // namespace uroce::core
