// The new post-send API (ibv_wr_start ... ibv_wr_complete): WRs are built in
// a per-QP batch and posted on ibv_wr_complete through the same path as
// ibv_post_send.
#include <cerrno>
#include <cstring>

#include "verbs/objects.h"

namespace uroce::verbs {
namespace {

WrBatch& batch(ibv_qp_ex* qp) { return uqp(qp)->batch; }

ibv_send_wr& new_wr(ibv_qp_ex* qp, ibv_wr_opcode op) {
  WrBatch& b = batch(qp);
  b.wrs.emplace_back();
  b.sges.emplace_back();
  b.inl.emplace_back();
  ibv_send_wr& w = b.wrs.back();
  memset(&w, 0, sizeof(w));
  w.wr_id = qp->wr_id;
  w.send_flags = qp->wr_flags;
  w.opcode = op;
  return w;
}

ibv_send_wr* last(ibv_qp_ex* qp) {
  WrBatch& b = batch(qp);
  if (b.wrs.empty()) {
    b.err = EINVAL;
    return nullptr;
  }
  return &b.wrs.back();
}

void wr_start(ibv_qp_ex* qp) {
  WrBatch& b = batch(qp);
  b.wrs.clear();
  b.sges.clear();
  b.inl.clear();
  b.err = 0;
  b.open = true;
}

int wr_complete(ibv_qp_ex* qp) {
  WrBatch& b = batch(qp);
  int err = b.err;
  if (!err) {
    for (size_t i = 0; i < b.wrs.size(); ++i) {
      ibv_send_wr& w = b.wrs[i];
      if (!b.inl[i].empty()) {
        b.sges[i].assign(1,
                         ibv_sge{reinterpret_cast<uint64_t>(b.inl[i].data()), uint32_t(b.inl[i].size()), 0});
        w.send_flags |= IBV_SEND_INLINE;
      }
      w.sg_list = b.sges[i].data();
      w.num_sge = int(b.sges[i].size());
      if ((err = post_send_one(uqp(qp), &w))) break;
    }
  }
  b.open = false;
  b.wrs.clear();
  return err;
}

void wr_abort(ibv_qp_ex* qp) {
  WrBatch& b = batch(qp);
  b.wrs.clear();
  b.open = false;
}

void wr_send(ibv_qp_ex* qp) { new_wr(qp, IBV_WR_SEND); }
void wr_send_imm(ibv_qp_ex* qp, __be32 imm) { new_wr(qp, IBV_WR_SEND_WITH_IMM).imm_data = imm; }
void wr_send_inv(ibv_qp_ex* qp, uint32_t rkey) { new_wr(qp, IBV_WR_SEND_WITH_INV).invalidate_rkey = rkey; }
void wr_rdma_write(ibv_qp_ex* qp, uint32_t rkey, uint64_t addr) {
  ibv_send_wr& w = new_wr(qp, IBV_WR_RDMA_WRITE);
  w.wr.rdma.rkey = rkey;
  w.wr.rdma.remote_addr = addr;
}
void wr_rdma_write_imm(ibv_qp_ex* qp, uint32_t rkey, uint64_t addr, __be32 imm) {
  ibv_send_wr& w = new_wr(qp, IBV_WR_RDMA_WRITE_WITH_IMM);
  w.wr.rdma.rkey = rkey;
  w.wr.rdma.remote_addr = addr;
  w.imm_data = imm;
}
void wr_rdma_read(ibv_qp_ex* qp, uint32_t rkey, uint64_t addr) {
  ibv_send_wr& w = new_wr(qp, IBV_WR_RDMA_READ);
  w.wr.rdma.rkey = rkey;
  w.wr.rdma.remote_addr = addr;
}
void wr_atomic_cmp_swp(ibv_qp_ex* qp, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap) {
  ibv_send_wr& w = new_wr(qp, IBV_WR_ATOMIC_CMP_AND_SWP);
  w.wr.atomic.rkey = rkey;
  w.wr.atomic.remote_addr = addr;
  w.wr.atomic.compare_add = compare;
  w.wr.atomic.swap = swap;
}
void wr_atomic_fetch_add(ibv_qp_ex* qp, uint32_t rkey, uint64_t addr, uint64_t add) {
  ibv_send_wr& w = new_wr(qp, IBV_WR_ATOMIC_FETCH_AND_ADD);
  w.wr.atomic.rkey = rkey;
  w.wr.atomic.remote_addr = addr;
  w.wr.atomic.compare_add = add;
}
void wr_bind_mw(ibv_qp_ex* qp, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) {
  ibv_send_wr& w = new_wr(qp, IBV_WR_BIND_MW);
  w.bind_mw.mw = mw;
  w.bind_mw.rkey = rkey;
  w.bind_mw.bind_info = *info;
}
void wr_local_inv(ibv_qp_ex* qp, uint32_t rkey) { new_wr(qp, IBV_WR_LOCAL_INV).invalidate_rkey = rkey; }
void wr_unsupported_tso(ibv_qp_ex* qp, void*, uint16_t, uint16_t) { batch(qp).err = EOPNOTSUPP; }
// ATOMIC WRITE (IBA 1.5): the 8 bytes come from `data` (copied now, as
// inline data: the call names no memory region).
void wr_atomic_write(ibv_qp_ex* qp, uint32_t rkey, uint64_t addr, const void* data) {
  ibv_send_wr& w = new_wr(qp, IBV_WR_ATOMIC_WRITE);
  w.wr.rdma.rkey = rkey;
  w.wr.rdma.remote_addr = addr;
  auto* p = static_cast<const uint8_t*>(data);
  batch(qp).inl.back().assign(p, p + 8);
}
void wr_set_xrc_srqn(ibv_qp_ex* qp, uint32_t srqn) {
  if (ibv_send_wr* w = last(qp)) w->qp_type.xrc.remote_srqn = srqn;
}

void wr_set_ud_addr(ibv_qp_ex* qp, ibv_ah* ah, uint32_t qpn, uint32_t qkey) {
  if (ibv_send_wr* w = last(qp)) {
    w->wr.ud.ah = ah;
    w->wr.ud.remote_qpn = qpn;
    w->wr.ud.remote_qkey = qkey;
  }
}
void wr_set_sge(ibv_qp_ex* qp, uint32_t lkey, uint64_t addr, uint32_t length) {
  if (!last(qp)) return;
  batch(qp).sges.back().assign(1, ibv_sge{addr, length, lkey});
}
void wr_set_sge_list(ibv_qp_ex* qp, size_t n, const ibv_sge* list) {
  if (!last(qp)) return;
  batch(qp).sges.back().assign(list, list + n);
}
void wr_set_inline_data(ibv_qp_ex* qp, void* addr, size_t len) {
  if (!last(qp)) return;
  auto* p = static_cast<uint8_t*>(addr);
  batch(qp).inl.back().assign(p, p + len);
}
void wr_set_inline_data_list(ibv_qp_ex* qp, size_t n, const ibv_data_buf* bufs) {
  if (!last(qp)) return;
  auto& v = batch(qp).inl.back();
  v.clear();
  for (size_t i = 0; i < n; ++i) {
    auto* p = static_cast<uint8_t*>(bufs[i].addr);
    v.insert(v.end(), p, p + bufs[i].length);
  }
}

}  // namespace

void init_qp_ex_ops(UQp* q) {
  ibv_qp_ex& e = q->ex;
  e.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
  e.wr_atomic_fetch_add = wr_atomic_fetch_add;
  e.wr_bind_mw = wr_bind_mw;
  e.wr_local_inv = wr_local_inv;
  e.wr_rdma_read = wr_rdma_read;
  e.wr_rdma_write = wr_rdma_write;
  e.wr_rdma_write_imm = wr_rdma_write_imm;
  e.wr_send = wr_send;
  e.wr_send_imm = wr_send_imm;
  e.wr_send_inv = wr_send_inv;
  e.wr_send_tso = wr_unsupported_tso;
  e.wr_set_ud_addr = wr_set_ud_addr;
  e.wr_set_xrc_srqn = wr_set_xrc_srqn;
  e.wr_set_inline_data = wr_set_inline_data;
  e.wr_set_inline_data_list = wr_set_inline_data_list;
  e.wr_set_sge = wr_set_sge;
  e.wr_set_sge_list = wr_set_sge_list;
  e.wr_start = wr_start;
  e.wr_complete = wr_complete;
  e.wr_abort = wr_abort;
  e.wr_atomic_write = wr_atomic_write;
}

}  // namespace uroce::verbs
