#include "memory/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/log.h"

namespace uroce::core {

namespace {
size_t size_class(size_t bytes) {
  size_t c = kCacheLine;
  while (c < bytes) c <<= 1;
  return c;
}
}  // namespace

Result<std::unique_ptr<Segment>> Segment::create() {
  std::unique_ptr<Segment> s(new Segment());
  s->memfd_ = memfd_create("uroce-ctx", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (s->memfd_ < 0) return Status(errno);
  // It only ever grows: uroced and peers check what they touch against its
  // size once, and nothing can later vanish under them (SIGBUS).
  if (fcntl(s->memfd_, F_ADD_SEALS, F_SEAL_SHRINK) != 0) return Status(errno);
  s->view_.bound.memfd = s->memfd_;
  s->view_.bound.own = true;
  void* p = mmap(nullptr, kSegReserveBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, s->memfd_, 0);
  if (p == MAP_FAILED) return Status(errno);
  s->base_ = static_cast<uint8_t*>(p);
  const uint64_t mr_off = sizeof(SegHeader);
  const uint64_t arena = mr_off + uint64_t(kMaxMrPerContext) * sizeof(MrEntry);
  if (Status st = s->grow_to(arena + (1u << 20)); !st) return st;
  SegHeader* h = s->header();
  h->magic = kSegMagic;
  h->owner_pid = getpid();
  h->mr_capacity = kMaxMrPerContext;
  h->mr_table_off = mr_off;
  h->arena_off = arena;
  h->alive.store(1, std::memory_order_release);
  s->top_ = arena;
  s->view_.pid = getpid();
  s->view_.base = s->base_;
  s->view_.mr_table = s->mr_table();
  s->view_.mr_capacity = kMaxMrPerContext;
  return s;
}

Segment::~Segment() {
  if (base_) munmap(base_, kSegReserveBytes);
  if (memfd_ >= 0) close(memfd_);
}

Status Segment::grow_to(uint64_t bytes) {
  if (bytes <= file_size_) return Status::ok();
  uint64_t want = std::max(bytes, file_size_ * 2);
  want = (want + 0xfffff) & ~uint64_t(0xfffff);
  if (want > kSegReserveBytes) return Status(ENOMEM);
  if (ftruncate(memfd_, off_t(want)) != 0) return Status(errno);
  file_size_ = want;
  view_.bound.size.store(want, std::memory_order_relaxed);
  return Status::ok();
}

size_t Segment::block_size(size_t bytes) { return size_class(bytes); }

Result<uint64_t> Segment::alloc(size_t bytes) {
  std::lock_guard<std::mutex> g(mu_);
  size_t c = size_class(bytes);
  auto it = free_.find(c);
  uint64_t off;
  if (it != free_.end() && !it->second.empty()) {
    off = it->second.front();
    it->second.erase(it->second.begin());
    memset(base_ + off, 0, c);
  } else {
    // Above the top the file was never written: its pages are zero
    // already, and stay untouched (no page fault) until used.
    uint64_t align = std::min<size_t>(c, 4096);
    off = (top_ + align - 1) & ~(align - 1);
    if (Status st = grow_to(off + c); !st) return st;
    top_ = off + c;
  }
  return off;
}

void Segment::free(uint64_t off, size_t bytes) {
  std::lock_guard<std::mutex> g(mu_);
  free_[size_class(bytes)].push_back(off);
}

bool SegBound::refresh_covers(uint64_t off, uint64_t len) {
  std::lock_guard<std::mutex> g(mu);
  struct stat st;
  if (memfd >= 0 && fstat(memfd, &st) == 0)  // never beyond the address space reserved for the segment
    size.store(std::min<uint64_t>(uint64_t(st.st_size), kSegReserveBytes), std::memory_order_relaxed);
  const uint64_t s = size.load(std::memory_order_relaxed);
  return off <= s && len <= s - off;
}

void SegBound::release() {
  std::lock_guard<std::mutex> g(mu);
  if (memfd < 0) return;
  struct stat st;
  if (fstat(memfd, &st) == 0)
    size.store(std::min<uint64_t>(uint64_t(st.st_size), kSegReserveBytes), std::memory_order_relaxed);
  close(memfd);
  memfd = -1;
}

void SegBound::set_corrupt(const char* what) {
  if (corrupt.exchange(true, std::memory_order_relaxed)) return;
  if (own)
    UROCE_ERR(
        "this process's context segment holds nonsense (%s), written by a peer: the device is now fatal",
        what);
  else
    UROCE_ERR("a peer's context segment holds nonsense (%s): its QPs now fail as if it were gone", what);
}

}  // namespace uroce::core
