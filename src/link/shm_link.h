// The intra-host link's "DMA engine": moves bytes between this process and a
// peer process on the same host with one copy (process_vm_writev/readv, or
// memcpy when the peer is this process), and performs RDMA atomics under the
// host-wide stripe locks so they are atomic against each other.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

#include "core/shm_layout.h"

namespace uroce::link {

/// This process's pid (cached; correct after fork()).
int32_t self_pid();

/// Copies the bytes described by `local` into `remote` in process `pid`.
/// Both lists describe the same number of bytes. Returns 0 or -errno
/// (-ESRCH: the peer is gone; -EFAULT: an address is not mapped).
int copy_to_peer(int32_t pid, const iovec* local, size_t n_local, const iovec* remote, size_t n_remote);
/// Copies from `remote` in process `pid` into `local`.
int copy_from_peer(int32_t pid, const iovec* local, size_t n_local, const iovec* remote, size_t n_remote);

enum class AtomicOp { kCmpSwap, kFetchAdd };
/// 8-byte RDMA atomic at `remote_addr` in process `pid`; *orig gets the old value.
int atomic_on_peer(core::HostShm* host, int32_t pid, uint64_t remote_addr, AtomicOp op, uint64_t compare_add,
                   uint64_t swap, uint64_t* orig);

}  // namespace uroce::link
