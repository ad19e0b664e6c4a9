// Completion-queue ring operations on shared memory (see CqRing). Producers
// may be in any process; the consumer is the owner.
//
// The tail word is [generation:15][frozen:1][position:48]. A resize freezes
// the tail (producers wait), lets every claimed slot be published, moves the
// entries to a larger slot array and unfreezes with the next generation, so a
// producer that read the old geometry fails its CAS instead of writing there.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>

#include "common/clock.h"
#include "contract/shm_layout.h"
#include "memory/seg_bound.h"

namespace uroce::core {

constexpr uint64_t kCqPosMask = (1ull << 48) - 1;
constexpr uint64_t kCqFrozen = 1ull << 48;
constexpr uint64_t kCqGenOne = 1ull << 49;
/// How long a producer waits for a resize to finish before reporting overflow.
constexpr uint64_t kCqFrozenWaitNs = 1000000000ull;

template <typename T>
inline T ld_acq(const T& v) {
  return std::atomic_ref<T>(const_cast<T&>(v)).load(std::memory_order_acquire);
}
template <typename T>
inline void st_rel(T& v, T x) {
  std::atomic_ref<T>(v).store(x, std::memory_order_release);
}

inline Cqe* cq_slots(uint8_t* seg_base, const CqRing* r) {
  return reinterpret_cast<Cqe*>(seg_base + ld_acq(r->slots_off));
}

/// A CQ's slot array and size as its owner keeps them, privately, in one
/// word ([log2 capacity:16][slots_off:48]): producers in other processes
/// write into the ring, and one that scribbled over the ring's own copy of
/// its geometry must not steer the owner's reads and moves outside it.
/// 0: take the ring's copy (tests of the ring alone).
inline uint64_t cq_geom_pack(uint64_t slots_off, uint32_t cap) {
  return slots_off | (uint64_t(std::countr_zero(cap)) << 48);
}
struct CqGeom {
  Cqe* slots;
  uint8_t* bounce;  // the bounce records, after the slots
  uint32_t cap, mask;
};
inline CqGeom cq_geom(uint8_t* seg_base, const CqRing* r, uint64_t packed) {
  uint64_t off;
  uint32_t cap;
  if (packed) {
    off = packed & ((1ull << 48) - 1);
    cap = 1u << (packed >> 48);
  } else {
    off = ld_acq(r->slots_off);
    cap = ld_acq(r->capacity);
  }
  auto* slots = reinterpret_cast<Cqe*>(seg_base + off);
  return CqGeom{slots, reinterpret_cast<uint8_t*>(slots) + size_t(cap) * sizeof(Cqe), cap, cap - 1};
}

/// kCorrupt: the ring (in a peer's segment) holds nonsense; nothing was
/// written and the segment is marked (memory/seg_bound.h).
enum class CqPush { kOk, kOkNotify, kOverflow, kCorrupt };

/// Payload for a bounced completion: gathered from `src` into the record.
struct CqBounce {
  uint64_t dst;             // where the receiver copies it (its own address space)
  const struct iovec* src;  // the sender's buffers (this address space)
  size_t nsrc;
  uint32_t len;
};

/// Producer side of the arm protocol (see cq_push and cq_arm_barrier): true
/// in a process that is not registered for the consumers' membarrier (or
/// after fork(), whose child is not), or once any process on the host said
/// it cannot issue that membarrier (HostShm::cq_producers_fence).
inline std::atomic<bool> g_cq_self_fence{true};
inline std::atomic<const std::atomic<uint32_t>*> g_cq_host_fence{nullptr};
inline bool cq_producer_must_fence() {
  if (g_cq_self_fence.load(std::memory_order_relaxed)) return true;
  const std::atomic<uint32_t>* h = g_cq_host_fence.load(std::memory_order_relaxed);
  return h && h->load(std::memory_order_relaxed) != 0;
}

/// Publishes one completion. `solicited` is true for solicited or error
/// completions (they satisfy a kArmSolicited arm). Returns kOkNotify when the
/// caller must wake the CQ's completion channel.
/// `bound`: the CQ is in a peer's segment, whose geometry is checked.
inline CqPush cq_push(uint8_t* seg_base, CqRing* r, const Cqe& c, bool solicited,
                      const CqBounce* bounce = nullptr, uint64_t* head_seen = nullptr,
                      SegBound* bound = nullptr) {
  uint64_t tw = r->tail.load(std::memory_order_acquire);
  uint64_t frozen_since = 0;
  for (;;) {
    if (tw & kCqFrozen) {
      // The owner is resizing: wait (bounded) for the new geometry.
      uint64_t now = now_ns();
      if (!frozen_since) frozen_since = now;
      if (now - frozen_since > kCqFrozenWaitNs) return CqPush::kOverflow;
      cpu_relax();
      tw = r->tail.load(std::memory_order_acquire);
      continue;
    }
    // head is the consumer's line: load it only when the producer's private
    // copy (head only grows, so a stale copy under-states the room) says "full".
    uint64_t h = head_seen ? *head_seen : 0;
    if ((tw & kCqPosMask) - h >= ld_acq(r->capacity)) {
      h = r->head.load(std::memory_order_acquire);  // pairs with cq_pop's release
      if (head_seen) *head_seen = h;
      if ((tw & kCqPosMask) - h >= ld_acq(r->capacity)) {
        r->overflow.store(1, std::memory_order_relaxed);
        return CqPush::kOverflow;
      }
    }
    if (r->tail.compare_exchange_weak(tw, tw + 1, std::memory_order_acq_rel)) break;
  }
  const uint64_t t = tw & kCqPosMask;
  // Geometry read (once) after the claim: a resize cannot change it until
  // this slot is published.
  const uint64_t slots_off = ld_acq(r->slots_off);
  const uint32_t cap = ld_acq(r->capacity), mask = ld_acq(r->mask);
  if (bound && (mask != cap - 1 || (cap & mask) != 0 || cap > (1u << 24) || slots_off % alignof(Cqe) ||
                !bound->covers(slots_off, cq_slot_array_bytes(cap)))) {
    bound->set_corrupt("a completion queue outside the segment");
    return CqPush::kCorrupt;
  }
  uint8_t* slots = seg_base + slots_off;
  Cqe* s = reinterpret_cast<Cqe*>(slots) + (t & mask);
  if (bounce) {
    uint8_t* rec = slots + size_t(cap) * sizeof(Cqe) + size_t(t & mask) * kCqBounceBytes;
    memcpy(rec, &bounce->dst, 8);
    uint8_t* p = rec + 8;
    size_t left = bounce->len;
    for (size_t i = 0; i < bounce->nsrc && left; ++i) {
      size_t n = std::min(left, bounce->src[i].iov_len);
      memcpy(p, bounce->src[i].iov_base, n);
      p += n;
      left -= n;
    }
  }
  // Copy everything but the sequence word, then publish.
  memcpy(reinterpret_cast<char*>(s) + sizeof(s->seq), reinterpret_cast<const char*>(&c) + sizeof(c.seq),
         sizeof(Cqe) - sizeof(c.seq));
  if (r->want_ts) s->timestamp_ns = now_ns();  // the clock read only for CQs that report it
  std::atomic_ref<uint64_t>(s->seq).store(t + 1, std::memory_order_release);  // pairs with cq_pop's acquire
  // Publish-then-read-arm against the consumer's arm-then-poll (Dekker): the
  // consumer's membarrier normally orders both sides (cq_arm_barrier), so the
  // producer needs no fence of its own -- which stalls on the slot's
  // cross-core miss and costs up to 3x the message rate here.
  if (cq_producer_must_fence()) std::atomic_thread_fence(std::memory_order_seq_cst);
  uint32_t armed = r->armed.load(std::memory_order_relaxed);
  if (armed == 0 || (armed == kArmSolicited && !solicited)) return CqPush::kOk;
  if (r->armed.exchange(0, std::memory_order_seq_cst) != 0) return CqPush::kOkNotify;
  return CqPush::kOk;
}

/// Consumer: hands up to `n` published completions, in order, to `take`
/// (which reads them in place, before their slots are released), then
/// releases them. Owner only, under its lock. Returns how many.
/// `gate(cqe, budget, &extra)`, called before each completion is taken,
/// may first hand over up to `budget` completions of its own that must come
/// before it (it adds how many to *extra) and returns false to stop before
/// this one (its slot stays published).
template <typename Take, typename Gate>
inline int cq_pop_each(uint8_t* seg_base, CqRing* r, int n, Take&& take, uint64_t geom, Gate&& gate) {
  const CqGeom g = cq_geom(seg_base, r, geom);
  Cqe* slots = g.slots;
  const uint32_t mask = g.mask;
  uint64_t h = r->head.load(std::memory_order_relaxed);
  int got = 0;
  while (got < n) {
    Cqe* s = &slots[h & mask];
    if (std::atomic_ref<uint64_t>(s->seq).load(std::memory_order_acquire) != h + 1)
      break;  // pairs with cq_push's release
    int extra = 0;
    const bool go = gate(static_cast<const Cqe&>(*s), n - got, &extra);
    got += extra;
    if (!go || got >= n) break;
    if (s->wc_flags & kCqeBounced) {
      // Deliver the payload now, before the slot (and its record) is released.
      const uint8_t* rec = g.bounce + size_t(h & mask) * kCqBounceBytes;
      uint64_t dst;
      memcpy(&dst, rec, 8);
      memcpy(reinterpret_cast<void*>(dst), rec + 8, std::min<uint32_t>(s->byte_len, kCqBouncePayload));
      s->wc_flags &= ~kCqeBounced;
    }
    take(*s);
    ++got;
    ++h;
  }
  if (got) r->head.store(h, std::memory_order_release);  // pairs with cq_push's acquire
  return got;
}

template <typename Take>
inline int cq_pop_each(uint8_t* seg_base, CqRing* r, int n, Take&& take, uint64_t geom = 0) {
  return cq_pop_each(seg_base, r, n, take, geom, [](const Cqe&, int, int*) { return true; });
}

/// Consumer: copies up to `n` completions into `out`. Owner only, under its lock.
inline int cq_pop(uint8_t* seg_base, CqRing* r, Cqe* out, int n, uint64_t geom = 0) {
  int i = 0;
  return cq_pop_each(
      seg_base, r, n, [&](const Cqe& c) { memcpy(static_cast<void*>(&out[i++]), &c, sizeof(Cqe)); }, geom);
}

/// Lock-free hint for the owner: is a completion published at the head? A
/// stale answer is harmless (the caller then polls under its lock, or tries
/// again); it spares an empty poll the lock.
inline bool cq_peek_ready(uint8_t* seg_base, CqRing* r, uint64_t geom = 0) {
  const uint64_t h = r->head.load(std::memory_order_relaxed);
  const CqGeom g = cq_geom(seg_base, r, geom);
  Cqe* s = &g.slots[h & g.mask];
  return std::atomic_ref<uint64_t>(s->seq).load(std::memory_order_acquire) == h + 1;
}

/// Number of completions claimed but not yet consumed (owner only).
inline uint64_t cq_depth(const CqRing* r) {
  return (r->tail.load(std::memory_order_acquire) & kCqPosMask) - r->head.load(std::memory_order_relaxed);
}

/// Owner only, under its poll lock: moves the ring to `new_slots_off` (room
/// for `new_cap` entries, a power of two >= the entries present). Returns
/// false if a producer died in the middle of publishing (its slot is lost).
inline bool cq_resize(uint8_t* seg_base, CqRing* r, uint64_t new_slots_off, uint32_t new_cap,
                      uint64_t geom = 0) {
  uint64_t tw = r->tail.fetch_or(kCqFrozen, std::memory_order_acq_rel);
  const uint64_t end = tw & kCqPosMask;
  const uint64_t head = r->head.load(std::memory_order_relaxed);
  const CqGeom old = cq_geom(seg_base, r, geom);
  Cqe* old_slots = old.slots;
  const uint32_t old_mask = old.mask;
  Cqe* new_slots = reinterpret_cast<Cqe*>(seg_base + new_slots_off);
  bool complete = true;
  for (uint64_t p = head; p < end; ++p) {
    Cqe* s = &old_slots[p & old_mask];
    uint64_t deadline = 0;
    // Wait (bounded) for a producer that claimed p before the freeze to publish it.
    while (std::atomic_ref<uint64_t>(s->seq).load(std::memory_order_acquire) != p + 1) {
      uint64_t now = now_ns();
      if (!deadline) deadline = now + kCqFrozenWaitNs;
      if (now > deadline) break;
      cpu_relax();
    }
    Cqe* d = &new_slots[p & (new_cap - 1)];
    memcpy(static_cast<void*>(d), s, sizeof(Cqe));
    memcpy(reinterpret_cast<uint8_t*>(new_slots) + size_t(new_cap) * sizeof(Cqe) +
               size_t(p & (new_cap - 1)) * kCqBounceBytes,
           old.bounce + size_t(p & old_mask) * kCqBounceBytes, kCqBounceBytes);
    if (std::atomic_ref<uint64_t>(s->seq).load(std::memory_order_acquire) != p + 1) {
      complete = false;
      std::atomic_ref<uint64_t>(d->seq).store(p + 1, std::memory_order_release);  // surfaces as a stale entry
    }
  }
  st_rel(r->slots_off, new_slots_off);
  st_rel(r->mask, new_cap - 1);
  st_rel(r->capacity, new_cap);
  // Unfreeze with a new generation: CASes based on the old tail word fail.
  r->tail.store(((tw & ~kCqPosMask & ~kCqFrozen) + kCqGenOne) | end, std::memory_order_release);
  return complete;
}

/// Owner only, under its poll lock: removes the completions `drop` selects
/// (those of a QP moved to RESET), keeping the others in order. Freezes the
/// tail as cq_resize does and waits (bounded) for every claimed slot to be
/// published; if one is not, nothing is removed (a producer's late write
/// could land on a moved entry). Returns how many were removed.
template <typename Drop>
inline uint32_t cq_purge(uint8_t* seg_base, CqRing* r, Drop&& drop, uint64_t geom = 0) {
  uint64_t tw = r->tail.fetch_or(kCqFrozen, std::memory_order_acq_rel);
  const uint64_t end = tw & kCqPosMask;
  const uint64_t head = r->head.load(std::memory_order_relaxed);
  const CqGeom g = cq_geom(seg_base, r, geom);
  Cqe* slots = g.slots;
  const uint32_t mask = g.mask;
  uint8_t* bounce = g.bounce;
  bool published = true;
  for (uint64_t p = head; p < end && published; ++p) {
    const Cqe* s = &slots[p & mask];
    uint64_t deadline = 0;
    while (std::atomic_ref<uint64_t>(const_cast<uint64_t&>(s->seq)).load(std::memory_order_acquire) !=
           p + 1) {
      uint64_t now = now_ns();
      if (!deadline) deadline = now + kCqFrozenWaitNs;
      if (now > deadline) {
        published = false;
        break;
      }
      cpu_relax();
    }
  }
  uint64_t w = end;
  if (published) {
    w = head;
    for (uint64_t p = head; p < end; ++p) {
      Cqe* s = &slots[p & mask];
      if (drop(static_cast<const Cqe&>(*s))) continue;
      if (w != p) {
        Cqe* d = &slots[w & mask];
        memcpy(static_cast<void*>(d), s, sizeof(Cqe));
        memcpy(bounce + size_t(w & mask) * kCqBounceBytes, bounce + size_t(p & mask) * kCqBounceBytes,
               kCqBounceBytes);
        std::atomic_ref<uint64_t>(d->seq).store(w + 1, std::memory_order_release);
      }
      ++w;
    }
    // Slots past the new tail must not look published to the consumer.
    for (uint64_t p = w; p < end; ++p)
      std::atomic_ref<uint64_t>(slots[p & mask].seq).store(0, std::memory_order_release);
  }
  // Unfreeze with a new generation: CASes based on the old tail word fail.
  r->tail.store(((tw & ~kCqPosMask & ~kCqFrozen) + kCqGenOne) | w, std::memory_order_release);
  return uint32_t(end - w);
}

}  // namespace uroce::core
