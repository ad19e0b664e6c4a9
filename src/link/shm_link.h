// The intra-host link's "DMA engine": moves bytes between this process and a
// peer process on the same host with one copy (memcpy when the target pages
// are mapped here — the peer is this process, or its region's pages are
// shared, see memory/peer_pages.h — else process_vm_writev/readv), and performs
// RDMA atomics under the host-wide stripe locks so they are atomic against
// each other whichever way they reach the memory.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace uroce::link {

/// The host-wide locks of RDMA atomics: a stripe per hash of (pid, address),
/// one cache line each. CAS(0, pid) acquires, store(0, release) frees; a
/// waiter may steal from a holder that no longer exists.
constexpr uint32_t kAtomicStripes = 4096;
struct alignas(64) AtomicStripe {
  std::atomic<int32_t> holder;
  char pad[64 - sizeof(std::atomic<int32_t>)];
};

/// This process's pid (cached; correct after fork()).
int32_t self_pid();

/// Copies the bytes described by `local` into `remote` in process `pid`.
/// Both lists describe the same number of bytes. Returns 0 or -errno
/// (-ESRCH: the peer is gone; -EFAULT: an address is not mapped).
int copy_to_peer(int32_t pid, const iovec* local, size_t n_local, const iovec* remote, size_t n_remote);
/// Copies from `remote` in process `pid` into `local`.
int copy_from_peer(int32_t pid, const iovec* local, size_t n_local, const iovec* remote, size_t n_remote);
/// Copies between two iovec lists of this address space (same byte count).
void copy_local_iov(const iovec* dst, size_t n_dst, const iovec* src, size_t n_src);
inline void copy_local(const iovec* dst, size_t n_dst, const iovec* src, size_t n_src) {
  if (n_dst == 1 && n_src == 1) {  // the usual case: one buffer each side
    memcpy(dst[0].iov_base, src[0].iov_base,
           dst[0].iov_len < src[0].iov_len ? dst[0].iov_len : src[0].iov_len);
    return;
  }
  copy_local_iov(dst, n_dst, src, n_src);
}

enum class AtomicOp { kCmpSwap, kFetchAdd, kStore };  // kStore: ATOMIC WRITE of `swap`
/// 8-byte RDMA atomic at `remote_addr` in process `pid`, reached through
/// `mapped` when that address is mapped here (else nullptr); *orig gets the old value.
int atomic_on_peer(AtomicStripe* stripes, int32_t pid, uint64_t remote_addr, uint64_t* mapped, AtomicOp op,
                   uint64_t compare_add, uint64_t swap, uint64_t* orig);

}  // namespace uroce::link
