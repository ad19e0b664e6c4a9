// Memory windows: ibv_alloc_mw, ibv_dealloc_mw and ibv_bind_mw (the
// ibv_context_ops slots), and what a bind WR carries (IBV_WR_BIND_MW,
// ibv_wr_bind_mw), over core::Context's windows (core/context_window.cc).
#include <cerrno>
#include <cstring>

#include "verbs/objects.h"

namespace uroce::verbs {

static_assert(IBV_ACCESS_REMOTE_WRITE == core::access::kRemoteWrite &&
              IBV_ACCESS_REMOTE_ATOMIC == core::access::kRemoteAtomic &&
              IBV_ACCESS_ZERO_BASED == core::access::kZeroBased &&
              IBV_ACCESS_MW_BIND == core::access::kMwBind);

core::WindowBind window_bind(const ibv_mw* mw, uint32_t new_key, const ibv_mw_bind_info& info) {
  core::WindowBind b{};
  b.key = mw->rkey;
  b.new_key = new_key;
  b.mr_key = info.mr ? info.mr->lkey : 0;
  b.addr = info.addr;
  b.len = info.length;
  b.access = info.mw_access_flags;
  return b;
}

ibv_mw* op_alloc_mw(ibv_pd* pd, ibv_mw_type type) {
  auto key = uctx(pd->context)->core->alloc_window(upd(pd)->id, uint32_t(type));
  if (!key.is_ok()) {
    errno = key.err();
    return nullptr;
  }
  auto* m = new UMw();
  memset(&m->mw, 0, sizeof(m->mw));
  m->mw.context = pd->context;
  m->mw.pd = pd;
  m->mw.rkey = key.value();
  m->mw.handle = key.value();
  m->mw.type = type;
  m->upd = upd(pd);
  m->upd->refs++;
  return &m->mw;
}

int op_dealloc_mw(ibv_mw* mw) {
  UMw* m = umw(mw);
  uctx(mw->context)->core->free_window(m->mw.handle);
  m->upd->refs--;
  delete m;
  return 0;
}

/// ibv_bind_mw (type 1; its inline wrapper checked the type and the MR's
/// PD): a BIND_MW work request on the QP's send queue, completing as
/// IBV_WC_BIND_MW in order; the window's next key is the current one with
/// its low byte bumped, as libmlx5 picks it.
int op_bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind) {
  core::SendWqe w;
  w.wr_id = bind->wr_id;
  w.opcode = core::WrOpcode::kBindMw;
  w.flags = bind->send_flags;
  w.bind = window_bind(mw, ibv_inc_rkey(mw->rkey), bind->bind_info);
  if (int e = uqp(qp)->core->post_send(w).err()) return e;
  mw->rkey = w.bind.new_key;
  return 0;
}

}  // namespace uroce::verbs
