// Owner side of the syscall-free intra-host path: the whole pages of a
// registered region are re-backed by a memfd (content copied, then the memfd
// mapping is moved over the same addresses), so a peer can map the same pages
// and move bytes with plain loads and stores instead of process_vm_writev.
//
// Writes to the pages are held from the copy to the move (memory/write_hold.h);
// where they cannot be held nothing is re-backed. Only private anonymous
// memory is re-backed (heap, anonymous mmap); pages the
// region only partly covers, file mappings, hugetlb, the stack and anything
// above UROCE_MR_SHARE_MAX bytes stay on the process_vm_* path. When the last
// region using a backing is deregistered the pages become private anonymous
// memory again (content copied back), and a fork() child gets private copies
// at once, as the kernel gives a child copies of pinned pages.
// docs/intra-host-link.md says what this trades away.
#pragma once

#include <cstdint>

namespace uroce::core {

/// How a peer finds a region's shared pages: fd (a number in the owner
/// process, for pidfd_getfd), inode (to check it got the right file), and the
/// owner address where the memfd's offset 0 is mapped. fd < 0: not shared.
struct MrShare {
  int32_t fd = -1;
  uint64_t ino = 0;
  uint64_t start = 0;
};

/// Shares the whole pages inside [addr, addr+len) when it may; returns the
/// backing a region over them uses (a backing already covering them is reused).
MrShare mr_share_acquire(uint64_t addr, uint64_t len);
/// Drops one use of a backing; the last one restores private memory.
void mr_share_release(const MrShare& s);

}  // namespace uroce::core
