// The part of a peer's context segment a reader may touch. A peer's segment
// is memory another process writes: every offset, size and index read from
// it is checked against the segment before it is used, so that a peer whose
// segment holds nonsense (a bug, a stray write, a hostile process of the
// same user) costs the reader an error, never an access outside the mapping
// (docs/intra-host-link.md, "What a peer can do").
//
// The segment's memfd is sealed against shrinking (memory/segment.h), so a
// range found inside it stays inside it; `size` is refreshed (fstat) only
// when an offset lies beyond what was last seen, as after the owner grew it.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace uroce::core {

struct SegBound {
  std::atomic<uint64_t> size{0};
  int memfd = -1;  // under mu (refresh_covers, release)
  std::mutex mu;
  /// Set once the segment was found to hold nonsense: every later use of
  /// it fails (PeerQp::valid).
  std::atomic<bool> corrupt{false};
  bool own = false;  // this process's own segment (which peers write into)

  /// True if [off, off+len) lies inside the segment.
  bool covers(uint64_t off, uint64_t len) {
    const uint64_t s = size.load(std::memory_order_relaxed);
    if (off <= s && len <= s - off) return true;
    return refresh_covers(off, len);
  }
  bool refresh_covers(uint64_t off, uint64_t len);
  /// The owner is gone (the file can no longer grow): takes the final size
  /// and closes the memfd, so that a long-lived process does not keep one
  /// descriptor per peer it ever talked to.
  void release();
  /// Records that the segment holds nonsense (`what`, logged once per segment).
  void set_corrupt(const char* what);
};

/// covers(), or nothing to check (`b` null: the caller's own segment).
inline bool seg_covers(SegBound* b, uint64_t off, uint64_t len) { return !b || b->covers(off, len); }

}  // namespace uroce::core
