// A small SEND on the intra-host link in one cache line (docs/intra-host-link.md,
// "A small SEND in one cache line"). The sender claims the receive by moving
// the receive queue's head (it does not read the receive WQE), writes one
// EagerRec into the receiver's EagerRing and completes; the receiver's
// poll_cq reads the record, its own receive WQE and buffers, and builds the
// completion there. One line crosses between the cores instead of the
// receive WQE, the completion slot and the payload's.
//
// Order: every receive of such a QP is claimed in message order (eagerly
// or by the usual delivery, memory/target.cc), and a record names the
// position it claimed, so the CQ hands the completions of one QP out in
// that order (Cq::poll_each): a record waits for the completions in the
// CQ ring before it, and a completion in the ring for the records before
// it. A claimed receive stays in its slot until its completion is polled
// (rq_post's `done`), as an HCA frees receive slots at poll_cq.
//
// Errors stay where an HCA reports them: the ring is used only while every
// receive posted since the QP's last reset fits the message and had valid
// keys when posted (EagerRing::limit); anything else takes the usual
// delivery, whose sender sees the error. A region deregistered between a
// receive's post and its record's poll fails that receive at the receiver
// (protection error, QP to ERR) while the sender has completed: the one
// order of errors that differs from an HCA's.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>

#include "contract/shm_layout.h"
#include "core/context.h"
#include "memory/peer_map.h"
#include "memory/target.h"

namespace uroce::core {

class Qp;

/// Sender (under its QP's send lock), for a SEND or SEND with Immediate of
/// `len` bytes on an RC or UC QP: true if the message was handled here
/// (*resp is the responder's answer), false if it takes respond_send.
bool eager_send(const PeerQp& t, const iovec* src, size_t nsrc, uint64_t len, const RecvMeta& m, Resp* resp);

/// False when UROCE_EAGER=0 (every SEND takes the usual delivery; read once).
bool eager_enabled();

/// Bytes of a ring of `records` records.
constexpr size_t eager_ring_bytes(uint32_t records) {
  return sizeof(EagerRing) + size_t(records) * sizeof(EagerRec);
}
/// Records for a QP whose receive queue holds `max_recv_wr`.
uint32_t eager_ring_records(uint32_t max_recv_wr);

/// The receiver's side of one QP's ring, kept by the QP's receive CQ and
/// used under that CQ's lock (the lock-free peeks excepted).
struct EagerRx {
  std::atomic<EagerRing*> ring{nullptr};  // null: a free place
  uint32_t mask = 0;
  uint32_t qpn = 0;
  Qp* qp = nullptr;
  QpShm* shm = nullptr;
  RqRing* rq = nullptr;
  std::atomic<uint64_t> cons{0};  // records read
  /// Receives of the QP whose completions were polled: their slots are free (rq_post's `done`).
  std::atomic<uint64_t> done{0};
  MrCache mr_cache{};
};

/// Lock-free hint: is the ring's next record published?
inline bool eager_ready(const EagerRx& e) {
  EagerRing* r = e.ring.load(std::memory_order_relaxed);
  if (!r) return false;
  const uint64_t c = e.cons.load(std::memory_order_relaxed);
  const EagerRec* rec = eager_rec(r, e.mask, c);
  return std::atomic_ref<const uint32_t>(rec->seq).load(std::memory_order_acquire) == uint32_t(c + 1);
}

/// Under the CQ's lock: the completion of the ring's next record, into *c,
/// if that record's receive is the oldest one not yet completed (else a
/// completion in the CQ ring goes first); false if none is due. Records
/// that carry no message are passed over.
bool eager_next(Context* ctx, EagerRx& e, Cqe* c);

}  // namespace uroce::core
