// Completion-queue ring operations on shared memory (see CqRing). Producers
// may be in any process; the consumer is the owner.
#pragma once

#include <atomic>
#include <cstring>

#include "core/shm_layout.h"

namespace uroce::core {

inline Cqe* cq_slots(uint8_t* seg_base, const CqRing* r) {
  return reinterpret_cast<Cqe*>(seg_base + r->slots_off);
}

enum class CqPush { kOk, kOkNotify, kOverflow };

/// Publishes one completion. `solicited` is true for solicited or error
/// completions (they satisfy a kArmSolicited arm). Returns kOkNotify when the
/// caller must wake the CQ's completion channel.
inline CqPush cq_push(uint8_t* seg_base, CqRing* r, const Cqe& c, bool solicited) {
  Cqe* slots = cq_slots(seg_base, r);
  uint64_t t = r->tail.load(std::memory_order_relaxed);
  for (;;) {
    uint64_t h = r->head.load(std::memory_order_acquire);  // pairs with cq_pop's release
    if (t - h >= r->capacity) {
      r->overflow.store(1, std::memory_order_relaxed);
      return CqPush::kOverflow;
    }
    if (r->tail.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel)) break;
  }
  Cqe* s = &slots[t & r->mask];
  // Copy everything but the sequence word, then publish.
  memcpy(reinterpret_cast<char*>(s) + sizeof(s->seq), reinterpret_cast<const char*>(&c) + sizeof(c.seq),
         sizeof(Cqe) - sizeof(c.seq));
  std::atomic_ref<uint64_t>(s->seq).store(t + 1, std::memory_order_release);  // pairs with cq_pop's acquire
  std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with req_notify's seq_cst store
  uint32_t armed = r->armed.load(std::memory_order_relaxed);
  if (armed == 0 || (armed == kArmSolicited && !solicited)) return CqPush::kOk;
  if (r->armed.exchange(0, std::memory_order_seq_cst) != 0) return CqPush::kOkNotify;
  return CqPush::kOk;
}

/// Consumer: copies up to `n` completions into `out`. Owner only, under its lock.
inline int cq_pop(uint8_t* seg_base, CqRing* r, Cqe* out, int n) {
  Cqe* slots = cq_slots(seg_base, r);
  uint64_t h = r->head.load(std::memory_order_relaxed);
  int got = 0;
  while (got < n) {
    Cqe* s = &slots[h & r->mask];
    if (std::atomic_ref<uint64_t>(s->seq).load(std::memory_order_acquire) != h + 1) break;  // pairs with cq_push's release
    memcpy(static_cast<void*>(&out[got]), s, sizeof(Cqe));
    ++got;
    ++h;
  }
  if (got) r->head.store(h, std::memory_order_release);  // pairs with cq_push's acquire
  return got;
}

/// True if a completion is ready at the head (owner only).
inline bool cq_ready(uint8_t* seg_base, const CqRing* r) {
  const Cqe* slots = cq_slots(seg_base, r);
  uint64_t h = r->head.load(std::memory_order_relaxed);
  return std::atomic_ref<uint64_t>(const_cast<Cqe*>(slots)[h & r->mask].seq).load(std::memory_order_acquire) == h + 1;
}

}  // namespace uroce::core
