// Fork support, ECE, dmabuf MRs and other verbs that
// uroce answers with a constant.
//
// Fork: uroce never pins or maps application memory into a device; the data
// path copies with process_vm_readv/writev, which works in a forked child as
// in the parent. So there is nothing to prepare (the kernel-NIC reason for
// ibv_fork_init, madvise(MADV_DONTFORK) on registered ranges, does not apply)
// and the library reports IBV_FORK_UNNEEDED, as rdma-core does on kernels
// with copy-on-fork pinning.

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "common/export.h"

// Declared in rdma-core's driver.h, which is not installed.
UROCE_EXPORT int ibv_dofork_range(void* base, size_t size);
UROCE_EXPORT int ibv_dontfork_range(void* base, size_t size);

namespace {

template <typename T>
T* unsupported_null() {
  errno = EOPNOTSUPP;
  return nullptr;
}

int unsupported() {
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

}  // namespace

// ---- Fork -------------------------------------------------------------------

UROCE_EXPORT int ibv_fork_init(void) { return 0; }

UROCE_EXPORT ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }

UROCE_EXPORT int ibv_dofork_range(void* base, size_t size) { return 0; }

UROCE_EXPORT int ibv_dontfork_range(void* base, size_t size) { return 0; }

// ---- RoCE L2 resolution -----------------------------------------------------

/// Used by providers to build RoCE address vectors from a GID via the
/// kernel's neighbour table; uroce's devices resolve their peers themselves.
/// A non-zero result is an error to every caller.
UROCE_EXPORT int ibv_resolve_eth_l2_from_gid(ibv_context* context, ibv_ah_attr* attr,
                                             uint8_t eth_mac[ETHERNET_LL_SIZE], uint16_t* vid) {
  return unsupported();
}

// ---- Enhanced Connection Establishment --------------------------------------

UROCE_EXPORT int ibv_query_ece(ibv_qp* qp, ibv_ece* ece) { return unsupported(); }

UROCE_EXPORT int ibv_set_ece(ibv_qp* qp, ibv_ece* ece) { return unsupported(); }

// ---- dmabuf memory regions --------------------------------------------------

/// GPU/accelerator memory exported as a dmabuf is not reachable with
/// process_vm_readv/writev. libfabric's verbs provider, which imports this,
/// accepts EOPNOTSUPP (abi.md §6).
UROCE_EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                                       int access) {
  return unsupported_null<ibv_mr>();
}

// ---- Ordering ---------------------------------------------------------------

/// 0 means "in-order data placement is not guaranteed", which is always a
/// safe answer: callers then wait for the completion before reading data.
UROCE_EXPORT int ibv_query_qp_data_in_order(ibv_qp* qp, ibv_wr_opcode op, uint32_t flags) { return 0; }
