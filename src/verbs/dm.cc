// Device memory: ibv_alloc_dm, ibv_free_dm, ibv_reg_dm_mr (verbs_context
// ops) and ibv_memcpy_to/from_dm (the callbacks in struct ibv_dm), over
// core::DeviceMemory.
#include <cerrno>
#include <cstring>

#include "common/export.h"
#include "verbs/objects.h"

namespace uroce::verbs {
namespace {

int memcpy_to_dm(ibv_dm* dm, uint64_t dm_offset, const void* host_addr, size_t length) {
  return udm(dm)->core->copy_to(dm_offset, host_addr, length).err();
}

int memcpy_from_dm(void* host_addr, ibv_dm* dm, uint64_t dm_offset, size_t length) {
  return udm(dm)->core->copy_from(host_addr, dm_offset, length).err();
}

/// What a device-memory MR may allow (mlx5's set; no MW binding, no ODP).
constexpr unsigned kDmMrAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_OPTIONAL_RANGE;

std::atomic<uint32_t> g_next_handle{1};

/// A program's handle `handle` on device memory `mem` (allocated, or imported).
UDm* new_dm(ibv_context* ctx, uint32_t handle, std::shared_ptr<core::DeviceMemory> mem) {
  auto* d = new UDm();
  memset(&d->dm, 0, sizeof(d->dm));
  d->dm.context = ctx;
  d->dm.memcpy_to_dm = memcpy_to_dm;
  d->dm.memcpy_from_dm = memcpy_from_dm;
  d->dm.handle = handle;
  d->core = std::move(mem);
  return d;
}

}  // namespace

ibv_dm* op_alloc_dm(ibv_context* ctx, ibv_alloc_dm_attr* attr) {
  if (attr->comp_mask) {
    errno = EINVAL;
    return nullptr;
  }
  auto core = core::DeviceMemory::alloc(attr->length, attr->log_align_req, uctx(ctx)->core->dm_budget());
  if (!core.is_ok()) {
    errno = core.err();
    return nullptr;
  }
  UDm* d = new_dm(ctx, g_next_handle.fetch_add(1), std::move(core.value()));
  SharedObjects& sh = *uctx(ctx)->shared;
  std::lock_guard<std::mutex> g(sh.mu);
  sh.dms[d->dm.handle] = d->core;
  return &d->dm;
}

int op_free_dm(ibv_dm* dm) {
  UDm* d = udm(dm);
  if (d->core->refs.load()) return EBUSY;  // MRs still map it
  {
    SharedObjects& sh = *uctx(dm->context)->shared;
    std::lock_guard<std::mutex> g(sh.mu);
    sh.dms.erase(d->dm.handle);  // no more imports; handles already made keep the memory
  }
  delete d;
  return 0;
}

ibv_mr* op_reg_dm_mr(ibv_pd* pd, ibv_dm* dm, uint64_t dm_offset, size_t length, unsigned int access) {
  UDm* d = udm(dm);
  // Always zero-based: the program never learns where the memory lives
  // (libibverbs' ibv_cmd_reg_dm_mr refuses anything else with EINVAL). An
  // empty region is allowed, as the kernel allows it for mlx5.
  if ((access & ~kDmMrAccess) || !(access & IBV_ACCESS_ZERO_BASED) ||
      ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
       !(access & IBV_ACCESS_LOCAL_WRITE)) ||
      dm_offset > d->core->length() || length > d->core->length() - dm_offset) {
    errno = EINVAL;
    return nullptr;
  }
  ibv_mr* mr = reg_mr_common(pd, reinterpret_cast<void*>(d->core->addr() + dm_offset), length, 0,
                             access & ~unsigned(IBV_ACCESS_OPTIONAL_RANGE));
  if (!mr) return nullptr;
  umr(mr)->dm = d;
  d->core->refs++;
  mr->addr = nullptr;  // as libibverbs reports a DM MR
  return mr;
}

/// ibv_import_dm(3): another handle on device memory of the context
/// `context` was imported from (or of `context` itself); EINVAL if none.
UROCE_EXPORT ibv_dm* ibv_import_dm(ibv_context* context, uint32_t dm_handle) {
  SharedObjects& sh = *uctx(context)->shared;
  std::shared_ptr<core::DeviceMemory> mem;
  {
    std::lock_guard<std::mutex> g(sh.mu);
    auto it = sh.dms.find(dm_handle);
    if (it != sh.dms.end()) mem = it->second;
  }
  if (!mem) {
    errno = EINVAL;
    return nullptr;
  }
  return &new_dm(context, dm_handle, std::move(mem))->dm;
}

/// ibv_unimport_dm(3): drops the handle; the memory stays allocated.
UROCE_EXPORT void ibv_unimport_dm(ibv_dm* dm) { delete udm(dm); }

}  // namespace uroce::verbs
