// Peer side of shared pages (memory/mr_backing.h): maps a peer's re-backed
// region pages into this process (pidfd_getfd of the owner's memfd, checked by
// inode) so the initiator moves bytes with memcpy instead of a system call.
// Mappings are cached per (peer segment, memfd); the service thread drops the
// ones no live region uses any more, so a peer's freed memory is not pinned.
#pragma once

#include <atomic>
#include <cstdint>

#include "contract/shm_layout.h"
#include "memory/segment.h"

namespace uroce::core {

/// This process's address of [vaddr, vaddr+len) of a peer's region `mr`
/// (just read from `slot` of `seg`'s MR table), or nullptr when those pages
/// are not shared with this process (the caller then uses process_vm_*).
uint8_t* peer_pages(PeerSegment* seg, const MrView& mr, uint32_t slot, uint64_t vaddr, uint64_t len);
extern std::atomic<uint64_t> g_peer_pages_gen;
/// Changes whenever a mapping is retired: an address peer_pages returned
/// stays this process's view of the peer's pages while this is unchanged.
inline uint64_t peer_pages_generation() { return g_peer_pages_gen.load(std::memory_order_acquire); }
/// Drops mappings that no live region of a live owner uses (service thread).
void peer_pages_sweep();
/// Drops every mapping of `seg`, which is about to be unmapped.
void peer_pages_forget(const PeerSegment* seg);

}  // namespace uroce::core
