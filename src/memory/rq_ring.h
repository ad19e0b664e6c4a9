// Receive-queue ring operations on shared memory (see RqRing): the owner
// posts, senders in any process claim.
#pragma once

#include <atomic>
#include <cstring>
#include <type_traits>

#include "contract/shm_layout.h"
#include "memory/seg_bound.h"

namespace uroce::core {

inline RqWqe* rq_slot(uint8_t* seg_base, const RqRing* r, uint64_t pos) {
  return reinterpret_cast<RqWqe*>(seg_base + r->slots_off + (pos & r->mask) * r->stride);
}

/// A ring's geometry, read once: what a claimer in another process uses
/// after checking it (the owner may hold anything there).
struct RqGeometry {
  uint64_t slots_off;
  uint32_t mask, stride, max_sge;
};
inline RqGeometry rq_geometry(const RqRing* r) {
  auto ld = [](const auto& v) {
    using T = std::remove_cvref_t<decltype(v)>;
    return std::atomic_ref<T>(const_cast<T&>(v)).load(std::memory_order_relaxed);
  };
  return RqGeometry{ld(r->slots_off), ld(r->mask), ld(r->stride), ld(r->max_sge)};
}
/// True if every slot of `g`, with as many SGEs as a claim copies, lies
/// inside the segment `b` bounds (b null: the caller's own, trusted).
inline bool rq_geometry_ok(const RqGeometry& g, SegBound* b) {
  if (!b) return true;
  const uint64_t slots = uint64_t(g.mask) + 1;
  const uint64_t wqe = sizeof(RqWqe) + uint64_t(g.max_sge < 32 ? g.max_sge : 32) * sizeof(Sge);
  return (slots & g.mask) == 0 && slots <= (1u << 24) && g.stride >= wqe && g.stride <= (1u << 20) &&
         g.slots_off % alignof(RqWqe) == 0 && b->covers(g.slots_off, slots * g.stride);
}

/// Owner: appends one receive. False if the queue already holds max_wr.
/// `head_seen` is the owner's private copy of head (head only grows, so a
/// stale copy only under-states the room): head, a line the claimers write,
/// is loaded only when the copy says "full", not on every post.
/// `bound`: checks the ring's geometry against the owner's own segment
/// first (claimers in other processes write into the ring; one that
/// scribbled over the geometry must not steer this write): nonsense marks
/// the segment corrupt and posts nothing.
/// `done` (optional): the receives whose slots are free are those before
/// *done rather than before head -- a QP with an EagerRing, whose claimed
/// receives stay in their slots until the owner's poll reads them
/// (core/eager.h), as an HCA's receive slots are freed when poll_cq
/// retires their completions.
inline bool rq_post(uint8_t* seg_base, RqRing* r, uint64_t wr_id, const Sge* sge, uint32_t num_sge,
                    uint64_t* head_seen, SegBound* bound = nullptr,
                    const std::atomic<uint64_t>* done = nullptr) {
  const RqGeometry g = rq_geometry(r);
  if (!rq_geometry_ok(g, bound) || (bound && num_sge > g.max_sge)) {
    bound->set_corrupt("a receive queue outside the segment");
    return false;
  }
  uint64_t t = r->tail.load(std::memory_order_relaxed);
  if (t - *head_seen >= r->max_wr) {
    *head_seen = done ? done->load(std::memory_order_acquire)
                      : r->head.load(std::memory_order_acquire);  // pairs with rq_claim's CAS
    if (t - *head_seen >= r->max_wr) return false;
  }
  RqWqe* w = reinterpret_cast<RqWqe*>(seg_base + g.slots_off + (t & g.mask) * uint64_t(g.stride));
  w->wr_id = wr_id;
  w->num_sge = num_sge;
  // A receive may have no SGE, and then sge may be null.
  if (num_sge) memcpy(w->sge, sge, sizeof(Sge) * num_sge);
  r->tail.store(t + 1, std::memory_order_release);  // pairs with rq_claim's acquire
  return true;
}

/// A claimed receive, copied out of the ring.
struct ClaimedRecv {
  uint64_t wr_id;
  uint32_t num_sge;
  Sge sge[32];
};

/// Copies the receive at position `pos` of a ring of geometry `g` (checked
/// with rq_geometry_ok) out of its slot.
inline void rq_copy(const uint8_t* seg_base, const RqGeometry& g, uint64_t pos, ClaimedRecv* out) {
  const RqWqe* w =
      reinterpret_cast<const RqWqe*>(seg_base + g.slots_off + (pos & g.mask) * uint64_t(g.stride));
  out->wr_id = w->wr_id;
  uint32_t n = std::atomic_ref<const uint32_t>(w->num_sge).load(std::memory_order_relaxed);
  if (n > g.max_sge || n > 32) n = 0;
  out->num_sge = n;
  memcpy(out->sge, w->sge, sizeof(Sge) * n);
}

/// The claim loop of rq_claim and rq_claim_pos: finds the oldest posted
/// receive, runs `before(h)` on its position (the slot cannot be reused
/// while head == h), then claims it with CAS(head, h, h+1). Arguments as
/// rq_claim's.
template <typename Before>
inline bool rq_take(RqRing* r, uint32_t mask, uint64_t* pos, uint64_t* left, uint64_t* tail_seen,
                    SegBound* bound, Before&& before) {
  uint64_t h = r->head.load(std::memory_order_acquire);
  for (;;) {
    uint64_t t = tail_seen ? *tail_seen : 0;
    if (h >= t) {
      t = r->tail.load(std::memory_order_acquire);  // pairs with rq_post's release
      if (tail_seen) *tail_seen = t;
      if (h >= t) return false;
    } else {
      std::atomic_thread_fence(std::memory_order_acquire);  // the slot was published before t was seen
    }
    if (bound && t - h > uint64_t(mask) + 1) {
      bound->set_corrupt("a receive queue's tail more than a ring ahead of its head");
      return false;
    }
    before(h);
    if (r->head.compare_exchange_weak(h, h + 1, std::memory_order_acq_rel)) {
      *pos = h;
      *left = t - h - 1;
      return true;
    }
  }
}

/// Any process: claims the oldest posted receive. Returns false if none.
/// `*left` gets the number still posted after the claim (a lower bound when
/// `tail_seen` is given). `tail_seen`, optional, is the claimer's private
/// copy of tail (tail only grows): tail, a line the owner writes on every
/// post, is loaded only when the copy says "empty". `bound`: the ring is in
/// a peer's segment; nonsense there (geometry outside it, a tail more than
/// a ring ahead of head) marks the segment corrupt and claims nothing.
inline bool rq_claim(uint8_t* seg_base, RqRing* r, ClaimedRecv* out, uint64_t* left,
                     uint64_t* tail_seen = nullptr, SegBound* bound = nullptr) {
  const RqGeometry g = rq_geometry(r);
  if (!rq_geometry_ok(g, bound)) {
    bound->set_corrupt("a receive queue outside the segment");
    return false;
  }
  uint64_t pos;
  return rq_take(r, g.mask, &pos, left, tail_seen, bound, [&](uint64_t h) { rq_copy(seg_base, g, h, out); });
}

/// Any process: claims the oldest posted receive without reading it (its
/// slot stays until the owner frees it: rq_post's `done`). Returns false
/// if none; else *pos is the receive's position. Arguments as rq_claim's.
inline bool rq_claim_pos(RqRing* r, uint64_t* pos, uint64_t* tail_seen, SegBound* bound) {
  const uint32_t mask = std::atomic_ref<uint32_t>(r->mask).load(std::memory_order_relaxed);
  uint64_t left;
  return rq_take(r, mask, pos, &left, tail_seen, bound, [](uint64_t) {});
}

/// Number of receives currently posted.
inline uint64_t rq_count(const RqRing* r) {
  return r->tail.load(std::memory_order_acquire) - r->head.load(std::memory_order_acquire);
}

}  // namespace uroce::core
