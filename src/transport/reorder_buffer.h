// Request packets that arrived past a gap, kept by an RC responder until the
// gap fills (selective repeat: docs/congestion.md). IBTA's responder drops
// them and NAKs the gap, and its requester goes back and sends everything
// again; a responder that keeps them executes them, in PSN order, as soon
// as the missing packet arrives, so a requester that knows this resends
// only what was lost. A copy of each kept packet (headers and payload) waits
// in a slot chosen by its PSN; the slots are made at the first loss and keep
// their storage, so a QP that never lost holds none and one that lost once
// does not allocate again.
// Pure: no I/O. Used by RcResponder.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/psn.h"
#include "wire/packet.h"

namespace uroce::transport {

class ReorderBuffer {
 public:
  /// Room for packets up to `capacity` PSNs past the expected one (a power
  /// of two; 0: keeps nothing).
  explicit ReorderBuffer(uint32_t capacity = 0) : capacity_(capacity) {}

  uint32_t capacity() const { return capacity_; }
  bool empty() const { return count_ == 0; }
  uint32_t size() const { return count_; }

  /// Keeps a copy of `p`, `ahead` PSNs past the expected PSN `epsn`.
  /// False if it cannot (too far ahead) or already has it (a duplicate).
  bool put(const wire::Packet& p, uint32_t epsn) {
    const int32_t ahead = psn_diff(p.bth.psn, epsn);
    if (ahead <= 0 || uint32_t(ahead) >= capacity_) return false;
    if (slots_.empty()) slots_.resize(capacity_);
    Slot& s = slot(p.bth.psn);
    if (s.used && s.p.bth.psn == p.bth.psn) return false;
    if (!s.used) ++count_;
    s.used = true;
    s.p = p;
    s.bytes.assign(p.payload.begin(), p.payload.end());
    s.p.payload = s.bytes;
    return true;
  }

  /// The packet kept for `psn`, or null; it stays valid until the next put
  /// or clear, and its slot is free again.
  const wire::Packet* take(uint32_t psn) {
    if (empty()) return nullptr;
    Slot& s = slot(psn);
    if (!s.used || s.p.bth.psn != psn) return nullptr;
    s.used = false;
    --count_;
    return &s.p;
  }

  /// Forgets packets not past `epsn` (a READ's PSN range covered them:
  /// nothing a correct requester sends), so that they are not counted.
  void drop_before(uint32_t epsn) {
    for (Slot& s : slots_)
      if (s.used && psn_diff(s.p.bth.psn, epsn) < 0) {
        s.used = false;
        --count_;
      }
  }

  void clear() {
    for (Slot& s : slots_) s.used = false;
    count_ = 0;
  }

 private:
  struct Slot {
    bool used = false;
    wire::Packet p;
    std::vector<uint8_t> bytes;
  };
  Slot& slot(uint32_t psn) { return slots_[psn & (slots_.size() - 1)]; }

  uint32_t capacity_;
  std::vector<Slot> slots_;  // capacity_ of them once one is kept
  uint32_t count_ = 0;
};

}  // namespace uroce::transport
