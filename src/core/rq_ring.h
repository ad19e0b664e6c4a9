// Receive-queue ring operations on shared memory (see RqRing): the owner
// posts, senders in any process claim.
#pragma once

#include <cstring>

#include "core/shm_layout.h"

namespace uroce::core {

inline RqWqe* rq_slot(uint8_t* seg_base, const RqRing* r, uint64_t pos) {
  return reinterpret_cast<RqWqe*>(seg_base + r->slots_off + (pos & r->mask) * r->stride);
}

/// Owner: appends one receive. False if the queue already holds max_wr.
/// `head_seen` is the owner's private copy of head (head only grows, so a
/// stale copy only under-states the room): head, a line the claimers write,
/// is loaded only when the copy says "full", not on every post.
inline bool rq_post(uint8_t* seg_base, RqRing* r, uint64_t wr_id, const Sge* sge, uint32_t num_sge,
                    uint64_t* head_seen) {
  uint64_t t = r->tail.load(std::memory_order_relaxed);
  if (t - *head_seen >= r->max_wr) {
    *head_seen = r->head.load(std::memory_order_acquire);  // pairs with rq_claim's CAS
    if (t - *head_seen >= r->max_wr) return false;
  }
  RqWqe* w = rq_slot(seg_base, r, t);
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

/// Any process: claims the oldest posted receive. Returns false if none.
/// `*left` gets the number still posted after the claim (a lower bound when
/// `tail_seen` is given). `tail_seen`, optional, is the claimer's private
/// copy of tail (tail only grows): tail, a line the owner writes on every
/// post, is loaded only when the copy says "empty".
inline bool rq_claim(uint8_t* seg_base, RqRing* r, ClaimedRecv* out, uint64_t* left,
                     uint64_t* tail_seen = nullptr) {
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
    const RqWqe* w = rq_slot(seg_base, r, h);
    // Copy before claiming: the slot cannot be reused while head == h.
    out->wr_id = w->wr_id;
    uint32_t n = w->num_sge;
    if (n > r->max_sge || n > 32) n = 0;
    out->num_sge = n;
    memcpy(out->sge, w->sge, sizeof(Sge) * n);
    if (r->head.compare_exchange_weak(h, h + 1, std::memory_order_acq_rel)) {
      *left = t - h - 1;
      return true;
    }
  }
}

/// Number of receives currently posted.
inline uint64_t rq_count(const RqRing* r) {
  return r->tail.load(std::memory_order_acquire) - r->head.load(std::memory_order_acquire);
}

}  // namespace uroce::core
