// An RDMA WRITE on a connected QP whose peer is on this host, posted the
// way a program that writes in a loop posts it: into the region it wrote
// last time. The general path (ShmEngine::execute, memory/target.cc) resolves the
// peer, reads the R_Key's MR-table slot, checks it and finds the region's
// pages in this process for every WQE — ~600 instructions before the first
// byte moves, all of them on the path of ib_write_lat's round trip. Here
// the region, checked once, is remembered with its address in this process,
// and a WQE checks only what can change: the slot's seqlock word (any
// deregistration, re-registration or window bind changes it), the peer QP
// (alive, the same, receiving, remote writes allowed) and peer_pages'
// generation (a retired mapping). Anything else takes the general path,
// which also produces every error completion.
#include <cstring>

#include "core/shm_engine.h"
#include "memory/peer_pages.h"
#include "memory/target.h"

namespace uroce::core {

bool ShmEngine::write_target_fill(uint32_t rkey, uint64_t raddr, uint64_t len) {
  wt_ = WriteTarget{};
  const PeerQp* p = peer_for(attr_.dest_qpn, &ud_peer_);  // RC, UC: resolves peer_
  if (!p) return false;
  const PeerQp& t = *p;
  if (t.qp->qp_type != uint32_t(type_) || !(t.qp->access_flags & access::kRemoteWrite)) return false;
  Rx x;
  if (!rx_of(t, 0, &x) || !x.mr_cache) return false;
  const uint64_t gen = peer_pages_generation();  // before any mapping is looked up
  MrView buf;
  const MrView* mr = target_mr(x, rkey, raddr, len, access::kRemoteWrite, &buf);
  // target_mr read the slot through x.mr_cache, which holds the seqlock
  // word its snapshot is good for.
  if (!mr || mr != &x.mr_cache->v) return false;
  // here stays null when only process_vm_writev reaches the region: the
  // general path then, without trying again until something changes.
  uint8_t* here = mapped(x, *mr, rkey, mr->vaddr, mr->length);
  wt_ = WriteTarget{x.mr_cache->e, x.mr_cache->seq, rkey, mr->iova, mr->length, here, gen, t.qp, t.qpn};
  return here != nullptr;
}

bool ShmEngine::write_direct(const SendWqe& w) {
  if (w.num_sge != 1 || type_ == QpType::kXrcSend) return false;
  // The source: the L_Key checks of every send (check_local); one buffer.
  iovec src[1];
  size_t nl = 0;
  uint64_t len = 0;
  if (owner_.check_local(w, src, &nl, &len) != WcStatus::kSuccess || nl != 1) return false;
  const WriteTarget& c = wt_;
  const bool hit = c.e && c.rkey == w.rkey && c.e->seq.load(std::memory_order_acquire) == c.seq &&
                   c.pages_gen == peer_pages_generation() && c.qp == peer_.qp && c.qpn == attr_.dest_qpn &&
                   peer_.qpn == c.qpn;
  if (hit ? !c.here : !write_target_fill(w.rkey, w.remote_addr, len)) return false;
  const PeerQp& t = peer_;
  if (!t.valid() || !state_can_receive(QpState(t.qp->state.load(std::memory_order_acquire))) ||
      !(t.qp->access_flags & access::kRemoteWrite))
    return false;
  if (w.remote_addr < c.iova || len > c.length || w.remote_addr - c.iova > c.length - len) return false;
  memcpy(c.here + (w.remote_addr - c.iova), src[0].iov_base, len);
  complete(w, WcStatus::kSuccess, uint32_t(len));
  return true;
}

}  // namespace uroce::core
