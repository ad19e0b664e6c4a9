// Protection domains and memory regions.
#include <cerrno>
#include <cstring>

#include "common/export.h"
#include "contract/limits.h"
#include "verbs/objects.h"

// verbs.h turns these names into inline wrappers; we define the real symbols.
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

namespace uroce::verbs {
namespace {

constexpr uint32_t kKnownAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                  IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |
                                  IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB;

/// Checks access flags as the man page says: remote write/atomic need local write.
int check_access(unsigned access) {
  access &= ~uint32_t(IBV_ACCESS_OPTIONAL_RANGE);
  if (access & ~kKnownAccess) return EINVAL;
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))
    return EINVAL;
  return 0;
}

}  // namespace

namespace {

UPd* new_pd(ibv_context* context, uint32_t id) {
  auto* p = new UPd();
  memset(&p->pd, 0, sizeof(p->pd));
  p->pd.context = context;
  p->pd.handle = p->id = id;
  return p;
}

}  // namespace

UROCE_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* context) {
  UContext* c = uctx(context);
  UPd* p = new_pd(context, c->core->alloc_pd_id());
  std::lock_guard<std::mutex> g(c->shared->mu);
  c->shared->pds.insert(p->id);
  return &p->pd;
}

UROCE_EXPORT int ibv_dealloc_pd(ibv_pd* pd) {
  UPd* p = upd(pd);
  if (p->refs.load()) return EBUSY;
  if (p->protection) p->protection->refs--;
  if (p->td) p->td->refs--;
  if (!p->protection) {  // the PD itself goes (a parent domain only stands for it)
    SharedObjects& sh = *uctx(pd->context)->shared;
    std::lock_guard<std::mutex> g(sh.mu);
    sh.pds.erase(p->id);
  }
  delete p;
  return 0;
}

/// ibv_import_pd(3): another handle on a PD of the context `context` was
/// imported from (or of `context` itself); EINVAL if it has none by that
/// handle.
UROCE_EXPORT ibv_pd* ibv_import_pd(ibv_context* context, uint32_t pd_handle) {
  SharedObjects& sh = *uctx(context)->shared;
  {
    std::lock_guard<std::mutex> g(sh.mu);
    if (!sh.pds.count(pd_handle)) {
      errno = EINVAL;
      return nullptr;
    }
  }
  return &new_pd(context, pd_handle)->pd;
}

/// ibv_unimport_pd(3): drops the handle; the PD stays (ibv_dealloc_pd on
/// any handle destroys it).
UROCE_EXPORT void ibv_unimport_pd(ibv_pd* pd) { delete upd(pd); }

/// ibv_alloc_td: a thread domain is a promise that one thread uses what is
/// created with it. uroce takes its locks anyway; the object only groups.
ibv_td* op_alloc_td(ibv_context* ctx, ibv_td_init_attr* attr) {
  if (attr->comp_mask) {
    errno = EINVAL;
    return nullptr;
  }
  auto* t = new UTd();
  t->td.context = ctx;
  return &t->td;
}

int op_dealloc_td(ibv_td* td) {
  auto* t = reinterpret_cast<UTd*>(td);
  if (t->refs.load()) return EBUSY;
  delete t;
  return 0;
}

/// ibv_alloc_parent_domain: a PD with a thread domain and custom allocators
/// for the provider's buffers. uroce's queues live in the context's shared
/// segment, where peers map them, so it never calls the allocators: as if
/// each returned IBV_ALLOCATOR_USE_DEFAULT (the man page leaves the use of
/// both to the provider).
ibv_pd* op_alloc_parent_domain(ibv_context* ctx, ibv_parent_domain_init_attr* attr) {
  constexpr uint32_t kKnown = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  if (!attr->pd || (attr->comp_mask & ~kKnown) || upd(attr->pd)->protection ||
      ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) && (!attr->alloc || !attr->free))) {
    errno = EINVAL;
    return nullptr;
  }
  UPd* base = upd(attr->pd);
  auto* p = new UPd();
  memset(&p->pd, 0, sizeof(p->pd));
  p->pd.context = ctx;
  p->pd.handle = base->pd.handle;
  p->id = base->id;
  p->protection = base;
  p->td = attr->td ? reinterpret_cast<UTd*>(attr->td) : nullptr;
  base->refs++;
  if (p->td) p->td->refs++;
  return &p->pd;
}

UROCE_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                      unsigned int access) {
  if (int e = check_access(access)) {
    errno = e;
    return nullptr;
  }
  if (!addr && length == SIZE_MAX && (access & IBV_ACCESS_ON_DEMAND)) {
    // An implicit on-demand region: the whole address space, for this
    // process's own work requests only (remote access is not offered).
    if (access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)) {
      errno = EOPNOTSUPP;
      return nullptr;
    }
    return reg_mr_common(pd, nullptr, SIZE_MAX, 0, access & ~uint32_t(IBV_ACCESS_OPTIONAL_RANGE));
  }
  if (length == 0 || length > core::kLimits.max_mr_size || (!addr && length)) {
    errno = EINVAL;
    return nullptr;
  }
  // Optional-range bits (relaxed ordering, ...) are hints: dropped silently.
  return reg_mr_common(pd, addr, length, iova, access & ~uint32_t(IBV_ACCESS_OPTIONAL_RANGE));
}

ibv_mr* reg_mr_common(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access) {
  UPd* p = upd(pd);
  UContext* c = uctx(pd->context);
  // Zero-based MRs address the region from 0.
  uint64_t va = (access & IBV_ACCESS_ZERO_BASED) ? 0 : iova;
  auto key = c->core->reg_mr(p->id, reinterpret_cast<uint64_t>(addr), length, va, access);
  if (!key.is_ok()) {
    errno = key.err();
    return nullptr;
  }
  auto* m = new UMr();
  memset(&m->mr, 0, sizeof(m->mr));
  m->upd = p;
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.handle = key.value();
  m->mr.lkey = key.value();
  m->mr.rkey = key.value();
  p->refs++;
  return &m->mr;
}

/// ibv_import_mr(3): another handle on an MR of the context the PD's
/// context shares (its handle is its key): keys and length as registered,
/// `addr` NULL as rdma-core reports it; EINVAL if there is none.
UROCE_EXPORT ibv_mr* ibv_import_mr(ibv_pd* pd, uint32_t mr_handle) {
  core::MrView v;
  if (!uctx(pd->context)->core->lookup_mr(mr_handle, &v) || (v.access & core::access::kWindow)) {
    errno = EINVAL;
    return nullptr;
  }
  auto* m = new UMr();
  memset(&m->mr, 0, sizeof(m->mr));
  m->upd = upd(pd);
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.length = v.length;
  m->mr.handle = m->mr.lkey = m->mr.rkey = v.key;
  m->upd->refs++;
  return &m->mr;
}

/// ibv_unimport_mr(3): drops the handle; the region stays registered.
UROCE_EXPORT void ibv_unimport_mr(ibv_mr* mr) {
  UMr* m = umr(mr);
  m->upd->refs--;
  delete m;
}

UROCE_EXPORT ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<uint64_t>(addr), unsigned(access));
}

UROCE_EXPORT ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, unsigned(access));
}

UROCE_EXPORT int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
  if (flags & ~(IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS))
    return IBV_REREG_MR_ERR_INPUT;
  if (!flags) return IBV_REREG_MR_ERR_INPUT;
  UMr* m = umr(mr);
  if (m->dm) return IBV_REREG_MR_ERR_INPUT;  // a device-memory MR stays as registered (as the kernel)
  UPd* np = (flags & IBV_REREG_MR_CHANGE_PD) ? upd(pd) : m->upd;
  if (!np) return IBV_REREG_MR_ERR_INPUT;
  void* naddr = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? addr : mr->addr;
  size_t nlen = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? length : mr->length;
  core::MrView cur;
  UContext* c = uctx(mr->context);
  if (!c->core->lookup_mr(mr->lkey, &cur)) return IBV_REREG_MR_ERR_INPUT;
  unsigned nacc = (flags & IBV_REREG_MR_CHANGE_ACCESS) ? unsigned(access) : cur.access;
  if (check_access(nacc)) return IBV_REREG_MR_ERR_INPUT;
  if (!naddr || nlen == 0) return IBV_REREG_MR_ERR_INPUT;
  uint64_t va = (nacc & IBV_ACCESS_ZERO_BASED) ? 0 : reinterpret_cast<uint64_t>(naddr);
  if (!c->core->rereg_mr(mr->lkey, np->id, reinterpret_cast<uint64_t>(naddr), nlen, va, nacc))
    return IBV_REREG_MR_ERR_CMD;
  if (np != m->upd) {
    m->upd->refs--;
    np->refs++;
    m->upd = np;
    mr->pd = &np->pd;
  }
  mr->addr = naddr;
  mr->length = nlen;
  return 0;
}

UROCE_EXPORT int ibv_dereg_mr(ibv_mr* mr) {
  UMr* m = umr(mr);
  if (int e = uctx(mr->context)->core->dereg_mr(mr->lkey).err()) return e;  // windows bound over it
  m->upd->refs--;
  if (m->dm) m->dm->core->refs--;
  delete m;
  return 0;
}

/// ibv_advise_mr (verbs_context op): prefetches ranges of on-demand regions,
/// with the errors its man page lists.
int op_advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list,
                 uint32_t num_sge) {
  if (flags & ~uint32_t(IBV_ADVISE_MR_FLAG_FLUSH)) return EINVAL;
  if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
      advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
    return EOPNOTSUPP;
  if (!sg_list || num_sge == 0) return EINVAL;
  // Done before returning, so IBV_ADVISE_MR_FLAG_FLUSH (wait) holds either way.
  core::Context* c = uctx(pd->context)->core.get();
  for (uint32_t i = 0; i < num_sge; ++i) {
    const ibv_sge& s = sg_list[i];
    Status st =
        c->prefetch_mr(upd(pd)->id, s.lkey, s.addr, s.length, advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
                       advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT);
    if (!st.is_ok()) return st.err();
  }
  return 0;
}

}  // namespace uroce::verbs
