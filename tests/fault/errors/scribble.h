// Scribbling over a context segment of this process, as a buggy or hostile
// peer could over it (corrupt_segment_test.cc): the peer process does it to
// its own segment, and the test to its own. Reads the layout of
// contract/shm_layout.h; no verbs.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "contract/shm_layout.h"
#include "fault/errors/peer_protocol.h"

namespace uroce::fault {

/// This process's context segment, mapped once more (the library's memfd,
/// found among our descriptors by its name and its owner).
struct OwnSegment {
  uint8_t* base = nullptr;
  uint64_t size = 0;
};
inline bool own_segment(OwnSegment* out) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return false;
  while (dirent* e = readdir(d)) {
    const std::string path = std::string("/proc/self/fd/") + e->d_name;
    char link[256] = {};
    if (readlink(path.c_str(), link, sizeof(link) - 1) <= 0 || strncmp(link, "/memfd:uroce-ctx", 16) != 0)
      continue;
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) continue;
    void* p = mmap(nullptr, size_t(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) continue;
    if (static_cast<uroce::core::SegHeader*>(p)->owner_pid == getpid()) {
      out->base = static_cast<uint8_t*>(p);
      out->size = uint64_t(st.st_size);
      closedir(d);
      return true;
    }
    munmap(p, size_t(st.st_size));
  }
  closedir(d);
  return false;
}

/// Makes corruption `c` in this process's segment, around QP `qpn`. 0 or an errno.
inline int corrupt_segment(uint32_t c, uint32_t qpn) {
  using namespace uroce::core;
  OwnSegment seg;
  if (!own_segment(&seg)) return ENOENT;
  auto* h = reinterpret_cast<SegHeader*>(seg.base);
  QpShm* q = nullptr;
  for (uint64_t off = h->arena_off; off + sizeof(QpShm) <= seg.size && !q; off += kCacheLine) {
    auto* cand = reinterpret_cast<QpShm*>(seg.base + off);
    if (cand->magic == kQpMagic && cand->qpn == qpn) q = cand;
  }
  if (!q || !q->rq_off || !q->recv_cq_off) {
    munmap(seg.base, seg.size);
    return ESRCH;
  }
  auto* rq = reinterpret_cast<RqRing*>(seg.base + q->rq_off);
  auto* cq = reinterpret_cast<CqRing*>(seg.base + q->recv_cq_off);
  constexpr uint64_t kFar = 1ull << 40;
  switch (c) {
    case kSegMagic:
      h->magic = 0x4e4f4e53454e5345ull;
      break;
    case kMrTableOff:
      h->mr_table_off = kFar;
      break;
    case kQpRingOffs:
      q->rq_off = seg.size + kCacheLine;
      q->recv_cq_off = ~uint64_t(0) - 63;
      break;
    case kRqSlotsOff:
      rq->slots_off = kFar;
      break;
    case kRqStride:
      rq->stride = 1;
      break;
    case kRqTailJump:
      rq->tail.fetch_add(kFar);
      break;
    case kCqSlotsOff:
      cq->slots_off = kFar;
      break;
    case kCqCapacity:
      cq->capacity = 1u << 31;
      cq->mask = (1u << 31) - 1;
      break;
    case kScribble:
      // Everything after the MR table: QPs, rings, CQs (this process may
      // well not survive its own next look at them; the test's must).
      memset(seg.base + h->arena_off, 0xa5, seg.size - h->arena_off);
      break;
    default:
      munmap(seg.base, seg.size);
      return EINVAL;
  }
  munmap(seg.base, seg.size);  // the stores stay: the mapping is shared
  return 0;
}

}  // namespace uroce::fault
