// The target side of a request, acting on a QP's shared state (its receive
// queue, CQ, MR table and process) as its NIC would. The intra-host link
// runs these in the initiator's process (transport/responder.cc); the
// network link runs them in the owner's own process, on its own QP
// (transport/net_env.cc).
#pragma once

#include "core/cq_ring.h"
#include "core/peer_map.h"
#include "core/rq_ring.h"
#include "core/types.h"
#include "transport/responder.h"

namespace uroce::transport {

/// Where a request's receive-side effects go: the target QP's own receive
/// queue, CQ, PD and process, or, for an XRC target QP, those of the XRC SRQ
/// the message names (IBA 9.8.2), which may live in another process.
struct Rx {
  core::PeerSegment* seg;
  core::RqRing* rq;  // null for a QP without a receive queue
  core::CqRing* cq;
  uint32_t pd_id;
  uint32_t qpn;  // the receiving QP (a type 2 window answers to the QP it was bound through)
  uint64_t* rq_tail_seen = nullptr;  // the requester's copies (see PeerQp), when they apply
  uint64_t* cq_head_seen = nullptr;
  core::MrCache* mr_cache = nullptr;
};

/// False if an XRC message names no valid SRQ of the target QP's domain.
bool rx_of(const core::PeerQp& t, uint32_t xrc_srqn, Rx* rx);
/// Validates `key` for [addr, addr+len) with `need` access in the receiving
/// PD (a type 2 window: through the QP it was bound through); returns the
/// region's snapshot, or nullptr.
const core::MrView* target_mr(const Rx& x, uint32_t key, uint64_t addr, uint64_t len, uint32_t need,
                              core::MrView* buf);
/// This process's address of [va, va+len) of the validated region `mr`
/// (named by `key`), or nullptr when only process_vm_* reaches it.
uint8_t* mapped(const Rx& x, const core::MrView& mr, uint32_t key, uint64_t va, uint64_t len);
void push_cqe(const Rx& x, const core::Cqe& c, bool solicited, const core::CqBounce* bounce = nullptr);
/// A SEND with Invalidate (IBA 10.6.7): revokes the receiver's type 2
/// window `rkey` (in its PD, bound through its QP); false if there is none.
bool revoke_window(const Rx& x, uint32_t rkey);
core::Cqe recv_cqe(const core::PeerQp& t, uint64_t wr_id, core::WcStatus st);
/// A responder-detected error: the target QP goes to ERR, its receive queue
/// is flushed (IBA 10.3.1.6) and its owner hears an async event.
void target_error(const core::PeerQp& t, core::AsyncEvent ev);
/// Claims a receive WQE; raises the SRQ limit event when it drains below the limit.
bool claim_recv(const core::PeerQp& t, const Rx& x, core::ClaimedRecv* r, RnrInfo* rnr);

}  // namespace uroce::transport
