// Resolution of a destination QPN to the shared state of the QP that owns it
// (in this or another process), with the owner's segment mapped here.
// Process-wide; entries are validated on every use (the QPN may have died).
#pragma once

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <unordered_map>

#include "common/status.h"
#include "contract/shm_layout.h"
#include "memory/segment.h"

namespace uroce::core {

/// A resolved target QP.
struct PeerQp {
  PeerSegment* seg = nullptr;
  QpShm* qp = nullptr;
  uint32_t qpn = 0;
  /// The requester's private copies of the target's RQ tail and receive-CQ
  /// head (see rq_claim, cq_push), kept with the cached peer of an RC QP.
  mutable uint64_t rq_tail_seen = 0;
  mutable uint64_t cq_head_seen = 0;
  /// The target QP's own receive ring and CQ (offsets fixed at its creation;
  /// null if it has none), and the last target MR the requester used.
  RqRing* rq = nullptr;
  CqRing* rcq = nullptr;
  mutable MrCache mr_cache;
  /// The target QP's EagerRing (core/eager.h) or null, its size - 1, and
  /// the requester's private copy of the ring's consumer count.
  EagerRing* eager = nullptr;
  uint32_t eager_mask = 0;
  mutable uint64_t eager_cons_seen = 0;
  /// Still the QP we resolved, and its owner alive?
  /// (And its segment not found to hold nonsense: memory/seg_bound.h.)
  bool valid() const {
    return seg && seg_owner_alive(seg->header()) && qp->magic == kQpMagic && qp->qpn == qpn &&
           !seg->bound.corrupt.load(std::memory_order_relaxed);
  }
};

/// A resolved XRC SRQ (IBA 9.8: XRC messages name the SRQ they go to).
struct PeerSrq {
  PeerSegment* seg = nullptr;
  RqRing* rq = nullptr;
  uint32_t srqn = 0;
  bool valid() const {
    return seg && seg_owner_alive(seg->header()) && rq->magic.load(std::memory_order_acquire) == kRqMagic &&
           rq->srq_num == srqn && !seg->bound.corrupt.load(std::memory_order_relaxed);
  }
};

class PeerMap {
 public:
  static PeerMap& get();
  /// Resolves `qpn` (cached; asks uroced on a miss or a stale entry).
  Result<PeerQp> resolve(uint32_t qpn);
  /// Resolves an XRC SRQ number the same way.
  Result<PeerSrq> resolve_srq(uint32_t srqn);

 private:
  Result<PeerSegment*> map_segment(uint32_t ctx_id, int32_t pid, int memfd);
  /// What the directory (contract/qp_directory.h) says of `qpn` if its owner's
  /// segment is mapped here already (mu_ held); nullptr otherwise.
  PeerSegment* mapped_owner(uint32_t qpn, bool is_srq, uint64_t* off);
  /// The QP (SRQ) at `off` of `seg`, checked and cached (mu_ held).
  Result<PeerQp> place_qp(PeerSegment* seg, uint32_t qpn, uint64_t off);
  Result<PeerSrq> place_srq(PeerSegment* seg, uint32_t srqn, uint64_t off);

  std::shared_mutex mu_;
  std::unordered_map<uint32_t, PeerQp> qps_;
  std::unordered_map<uint32_t, PeerSrq> srqs_;
  std::unordered_map<uint32_t, std::unique_ptr<PeerSegment>> segs_;
};

}  // namespace uroce::core
