// A context's shared-memory segment: a memfd reserved at kSegReserveBytes in
// every process that maps it, holding the MR table and an arena for rings.
// The owner allocates; peers get the memfd from uroced and map it read/write.
// The memfd is sealed against shrinking (F_SEAL_SHRINK): uroced and peers
// refuse one that is not.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "common/status.h"
#include "contract/shm_layout.h"
#include "memory/seg_bound.h"

namespace uroce::core {

/// A context's segment as this process reaches it: a peer's (mapped from
/// the memfd uroced passes; owned by PeerMap) or this process's own
/// (Segment::view), so that the helpers that act on a QP's shared state
/// (memory/target.h) serve both alike.
struct PeerSegment {
  uint32_t ctx_id = 0;
  int32_t pid = 0;
  uint8_t* base = nullptr;
  /// Its MR table, checked to lie inside the segment when it was mapped.
  MrEntry* mr_table = nullptr;
  uint32_t mr_capacity = 0;
  SegBound bound;
  SegHeader* header() const { return reinterpret_cast<SegHeader*>(base); }
  /// The table entry for `slot`, or nullptr past the table.
  MrEntry* mr_entry(uint32_t slot) const { return slot < mr_capacity ? mr_table + slot : nullptr; }
};

class Segment {
 public:
  /// Creates the memfd, maps it and initialises the header and MR table.
  static Result<std::unique_ptr<Segment>> create();
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  uint8_t* base() const { return base_; }
  int memfd() const { return memfd_; }
  SegHeader* header() const { return reinterpret_cast<SegHeader*>(base_); }
  MrEntry* mr_table() const { return reinterpret_cast<MrEntry*>(base_ + header()->mr_table_off); }
  template <typename T>
  T* at(uint64_t off) const {
    return reinterpret_cast<T*>(base_ + off);
  }
  uint64_t off_of(const void* p) const { return uint64_t(static_cast<const uint8_t*>(p) - base_); }
  /// What lies inside the file: for checks of geometry that peers could
  /// have scribbled over in this process's own segment (memory/seg_bound.h).
  SegBound& bound() { return view_.bound; }
  /// The segment as a peer's is seen (for the owner's own network
  /// responder, which acts on its QPs with the helpers peers use).
  PeerSegment* view() { return &view_; }
  /// The context id uroced gave the segment's context (in view()).
  void set_ctx_id(uint32_t id) { view_.ctx_id = id; }

  /// The size of the block alloc(bytes) takes (a power of two, at least a
  /// cache line): blocks of one size class are interchangeable.
  static size_t block_size(size_t bytes);
  /// Zeroed, cache-line aligned memory from the arena; returns its offset.
  Result<uint64_t> alloc(size_t bytes);
  /// Returns memory to the arena. Freed blocks are reused oldest-first, so a
  /// peer still holding a stale offset most likely sees a dead object.
  void free(uint64_t off, size_t bytes);

 private:
  Segment() = default;
  Status grow_to(uint64_t bytes);

  uint8_t* base_ = nullptr;
  int memfd_ = -1;
  PeerSegment view_;
  std::mutex mu_;
  uint64_t file_size_ = 0;
  uint64_t top_ = 0;
  std::map<size_t, std::vector<uint64_t>> free_;  // size class -> offsets (FIFO-ish)
};

}  // namespace uroce::core
