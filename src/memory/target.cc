#include "memory/target.h"

#include <cstring>

#include "common/clock.h"
#include "link/shm_link.h"
#include "memory/cq_ring.h"
#include "memory/notify.h"
#include "memory/peer_pages.h"
#include "memory/rq_ring.h"
#include "memory/trace.h"
#include "wire/grh.h"

namespace uroce::core {

namespace {

bool receiving(const PeerQp& t) {
  return t.valid() && state_can_receive(QpState(t.qp->state.load(std::memory_order_acquire)));
}

}  // namespace

bool rx_of_xrc(const PeerQp& t, uint32_t xrc_srqn, Rx* rx) {
  auto s = PeerMap::get().resolve_srq(xrc_srqn);
  if (!s.is_ok() || s->rq->xrcd_id != t.qp->xrcd_id) return false;
  const uint64_t cq_off = std::atomic_ref<uint64_t>(s->rq->cq_off).load(std::memory_order_relaxed);
  if (!s->seg->bound.covers(cq_off, sizeof(CqRing)) || cq_off % alignof(CqRing)) {
    s->seg->bound.set_corrupt("an SRQ's CQ outside the segment");
    return false;
  }
  rx->seg = s->seg;
  rx->rq = s->rq;
  rx->cq = reinterpret_cast<CqRing*>(s->seg->base + cq_off);
  rx->pd_id = s->rq->pd_id;
  rx->qpn = t.qpn;
  return true;
}

/// Validates `key` for [addr, addr+len) with `need` access in the receiving
/// PD; returns the region's snapshot, or nullptr.
const MrView* target_mr(const Rx& x, uint32_t key, uint64_t addr, uint64_t len, uint32_t need, MrView* buf) {
  const MrEntry* e = x.seg->mr_entry(key_slot(key));
  if (!e) return nullptr;
  const MrView* mr = buf;
  if (x.mr_cache)
    mr = mr_read_cached(e, key, x.mr_cache);
  else if (!mr_read(e, key, buf))
    mr = nullptr;
  if (!mr || mr->pd_id != x.pd_id || (mr->access & need) != need || !mr_contains(*mr, addr, len) ||
      ((mr->access & access::kWindow2) && mr->win_qpn != x.qpn))
    return nullptr;
  return mr;
}

bool revoke_window(const Rx& x, uint32_t rkey) {
  MrEntry* e = x.seg->mr_entry(key_slot(rkey));
  return e && mr_revoke_window(e, rkey, x.pd_id, x.qpn);
}

/// This process's address of [va, va+len) of the validated region `mr`
/// (named by `key`), or nullptr when only process_vm_* reaches it.
uint8_t* mapped(const Rx& x, const MrView& mr, uint32_t key, uint64_t va, uint64_t len) {
  if (x.seg->pid == link::self_pid()) return reinterpret_cast<uint8_t*>(va);
  return peer_pages(x.seg, mr, key_slot(key), va, len);
}

static void post_async(const PeerQp& t, AsyncEvent ev, uint64_t handle) {
  NotifyMsg m{kNotifyAsync, uint32_t(ev), handle};
  notify_post(t.qp->owner_pid, t.qp->owner_ctx_id, m);
}

void push_cqe(const Rx& x, const Cqe& c, bool solicited, const CqBounce* bounce) {
  if (tracing())
    trace(c.qp_num, "recv completion wr_id=%llu %s %s len=%u", (unsigned long long)c.wr_id,
          wc_opcode_name(WcOpcode(c.opcode)), wc_status_str(c.status), c.byte_len);
  CqRing* r = x.cq;
  if (!r) return;
  switch (cq_push(x.seg->base, r, c, solicited, bounce, x.cq_head_seen, &x.seg->bound)) {
    case CqPush::kOkNotify:
      cq_notify(r);
      break;
    case CqPush::kOverflow: {
      NotifyMsg m{kNotifyAsync, uint32_t(AsyncEvent::kCqErr), r->user_handle};
      notify_post(r->owner_pid, r->owner_async_id, m);
      break;
    }
    case CqPush::kOk:
    case CqPush::kCorrupt:  // the segment is marked: the requester's next check fails
      break;
  }
}

Cqe recv_cqe(const PeerQp& t, uint64_t wr_id, WcStatus st) {
  Cqe c{};
  c.wr_id = wr_id;
  c.status = uint32_t(st);
  c.opcode = uint32_t(WcOpcode::kRecv);
  c.qp_num = t.qpn;
  return c;
}

/// A responder-detected error: the target QP goes to ERR and its receive
/// queue is flushed (IBA 10.3.1.6), and its owner hears an async event.
void flush_receives(const PeerQp& t) {
  Rx x;
  if (t.qp->has_srq || !t.qp->rq_off || !rx_of(t, 0, &x) || !x.rq) return;
  ClaimedRecv r;
  uint64_t left;
  while (rq_claim(x.seg->base, x.rq, &r, &left, nullptr, &x.seg->bound))
    push_cqe(x, recv_cqe(t, r.wr_id, WcStatus::kWrFlushErr), true);
}

void target_error(const PeerQp& t, AsyncEvent ev) {
  if (!qp_enter_error(*t.qp)) return;  // not working, or ERR already
  flush_receives(t);
  post_async(t, ev, t.qp->user_handle);
}

/// Claims a receive WQE; raises the SRQ limit event when it drains below the limit.
bool claim_recv(const PeerQp& t, const Rx& x, ClaimedRecv* r, RnrInfo* rnr) {
  RqRing* rq = x.rq;
  uint64_t left = 0;
  if (!rq || !rq_claim(x.seg->base, rq, r, &left, x.rq_tail_seen, &x.seg->bound)) {
    if (!rq) return false;
    if (rnr) {
      rnr->rnr_timer = t.qp->min_rnr_timer;
      rnr->rq_tail = rq->tail.load(std::memory_order_acquire);
    }
    return false;
  }
  if (rq->is_srq) {
    uint32_t lim = rq->srq_limit.load(std::memory_order_relaxed);
    if (lim && left < lim && rq->srq_limit.exchange(0) != 0) {
      NotifyMsg m{kNotifyAsync, uint32_t(AsyncEvent::kSrqLimitReached), rq->user_handle};
      notify_post(rq->owner_pid, uint32_t(rq->owner_ctx_handle), m);
    }
  }
  return true;
}

uint64_t target_rq_tail(const PeerQp& t, uint32_t xrc_srqn) {
  Rx x;
  if (!t.valid() || !rx_of(t, xrc_srqn, &x) || !x.rq) return 0;
  return x.rq->tail.load(std::memory_order_acquire);
}

Resp respond_send(const PeerQp& t, const iovec* src, size_t nsrc, uint64_t len, const RecvMeta& m,
                  RnrInfo* rnr) {
  if (!receiving(t)) return Resp::kNoAnswer;
  Rx x;
  if (!rx_of(t, m.xrc_srqn, &x)) return Resp::kRemInvReq;
  ClaimedRecv r;
  if (!claim_recv(t, x, &r, rnr)) return Resp::kRnr;
  return deliver_send(t, x, r, src, nsrc, len, m);
}

Resp deliver_send(const PeerQp& t, const Rx& x, const ClaimedRecv& r, const iovec* src, size_t nsrc,
                  uint64_t len, const RecvMeta& m) {
  // Scatter list of the receive, checked against the target's MR table as
  // far as the message reaches (a 0-byte SEND checks none: libfabric posts
  // receives of unregistered buffers, key 0, for messages without data).
  // dst: target addresses; here: the same bytes mapped in this process
  // (all of them or the message goes through process_vm_writev).
  const uint64_t need = len + (m.with_grh ? wire::kGrhBytes : 0);
  iovec dst[33], here[33];
  size_t nd = 0;
  uint64_t cap = 0;
  bool all_here = true;
  for (uint32_t i = 0; i < r.num_sge && cap < need; ++i) {
    const Sge& s = r.sge[i];
    if (s.length == 0) continue;
    MrView buf;
    const MrView* mrp = target_mr(x, s.lkey, s.addr, s.length, access::kLocalWrite, &buf);
    if (!mrp) {
      push_cqe(x, recv_cqe(t, r.wr_id, WcStatus::kLocProtErr), true);
      target_error(t, AsyncEvent::kQpAccessErr);
      return Resp::kRemOp;
    }
    const MrView& mr = *mrp;
    const uint64_t va = mr.vaddr + (s.addr - mr.iova);
    dst[nd] = iovec{reinterpret_cast<void*>(va), s.length};
    uint8_t* p = all_here ? mapped(x, mr, s.lkey, va, s.length) : nullptr;
    all_here = p != nullptr;
    here[nd++] = iovec{p, s.length};
    cap += s.length;
  }
  if (need > cap) {
    // IBA 9.9.3.1.2.1: message longer than the receive buffer.
    push_cqe(x, recv_cqe(t, r.wr_id, WcStatus::kLocLenErr), true);
    target_error(t, AsyncEvent::kQpReqErr);
    return Resp::kRemInvReq;
  }
  if (m.has_inv && !revoke_window(x, m.inv_rkey)) {
    // No window of the receiver's to invalidate: an invalid request (the
    // receive completes as rxe completes it).
    push_cqe(x, recv_cqe(t, r.wr_id, WcStatus::kRemInvReqErr), true);
    target_error(t, AsyncEvent::kQpReqErr);
    return Resp::kRemInvReq;
  }
  // Trim the scatter list to what arrives.
  uint64_t left = need;
  size_t used = 0;
  for (; used < nd && left; ++used) {
    if (dst[used].iov_len > left) dst[used].iov_len = here[used].iov_len = left;
    left -= dst[used].iov_len;
  }
  iovec srcv[34];
  size_t ns = 0;
  if (m.with_grh) srcv[ns++] = iovec{const_cast<uint8_t*>(m.grh), wire::kGrhBytes};
  for (size_t i = 0; i < nsrc && ns < 34; ++i) srcv[ns++] = src[i];
  Cqe c = recv_cqe(t, r.wr_id, WcStatus::kSuccess);
  c.byte_len = uint32_t(need);
  c.src_qp = m.src_qpn;
  if (m.has_imm) {
    c.imm = m.imm;
    c.wc_flags |= wc_flags::kWithImm;
  } else if (m.has_inv) {
    c.imm = m.inv_rkey;  // ibv_wc.invalidated_rkey
    c.wc_flags |= wc_flags::kWithInv;
  }
  if (m.with_grh) {
    c.wc_flags |= wc_flags::kGrh;
    c.sl = wire::grh_packet_type(m.grh);
  }
  if (all_here) {
    link::copy_local(here, used, srcv, ns);
    push_cqe(x, c, m.solicited);
    return Resp::kOk;
  }
  if (need <= kCqBouncePayload && used <= 1 && x.cq) {
    // Small message: no system call. The receiver copies it out of the
    // completion's bounce record when it polls (before it can see the data).
    CqBounce b{need ? reinterpret_cast<uint64_t>(dst[0].iov_base) : 0, srcv, ns, uint32_t(need)};
    c.wc_flags |= need ? kCqeBounced : 0;
    push_cqe(x, c, m.solicited, need ? &b : nullptr);
    return Resp::kOk;
  }
  int rc = link::copy_to_peer(x.seg->pid, srcv, ns, dst, used);
  if (rc == -ESRCH) return Resp::kNoAnswer;
  if (rc != 0) {
    push_cqe(x, recv_cqe(t, r.wr_id, WcStatus::kLocProtErr), true);
    target_error(t, AsyncEvent::kQpAccessErr);
    return Resp::kRemOp;
  }
  push_cqe(x, c, m.solicited);
  return Resp::kOk;
}

Resp respond_write(const PeerQp& t, const iovec* src, size_t nsrc, uint64_t len, uint64_t raddr,
                   uint32_t rkey, const RecvMeta* imm, RnrInfo* rnr, uint32_t xrc_srqn) {
  if (!receiving(t)) return Resp::kNoAnswer;
  Rx x;
  if (!rx_of(t, xrc_srqn, &x)) return Resp::kRemInvReq;
  MrView buf;
  const MrView* mrp = &buf;
  if (len && (!(t.qp->access_flags & access::kRemoteWrite) ||
              !(mrp = target_mr(x, rkey, raddr, len, access::kRemoteWrite, &buf)))) {
    // IBA 9.7.5.1.3 / C9-95: invalid R_Key or range -> NAK remote access error.
    target_error(t, AsyncEvent::kQpAccessErr);
    return Resp::kRemAccess;
  }
  const MrView& mr = *mrp;
  ClaimedRecv r;
  if (imm && !claim_recv(t, x, &r, rnr)) return Resp::kRnr;
  if (len) {
    const uint64_t va = mr.vaddr + (raddr - mr.iova);
    int rc = 0;
    if (uint8_t* p = mapped(x, mr, rkey, va, len)) {
      iovec here{p, size_t(len)};
      link::copy_local(&here, 1, src, nsrc);
    } else {
      iovec dst{reinterpret_cast<void*>(va), size_t(len)};
      rc = link::copy_to_peer(x.seg->pid, src, nsrc, &dst, 1);
    }
    if (rc == -ESRCH) return Resp::kNoAnswer;
    if (rc != 0) {
      target_error(t, AsyncEvent::kQpAccessErr);
      return Resp::kRemAccess;
    }
  }
  if (imm) {
    Cqe c = recv_cqe(t, r.wr_id, WcStatus::kSuccess);
    c.opcode = uint32_t(WcOpcode::kRecvRdmaWithImm);
    c.byte_len = uint32_t(len);
    c.src_qp = imm->src_qpn;
    c.imm = imm->imm;
    c.wc_flags = wc_flags::kWithImm;
    push_cqe(x, c, imm->solicited);
  }
  return Resp::kOk;
}

Resp respond_read(const PeerQp& t, const iovec* dst, size_t ndst, uint64_t len, uint64_t raddr, uint32_t rkey,
                  uint32_t xrc_srqn) {
  if (!receiving(t)) return Resp::kNoAnswer;
  if (len == 0) return Resp::kOk;
  Rx x;
  if (!rx_of(t, xrc_srqn, &x)) return Resp::kRemInvReq;
  MrView buf;
  const MrView* mrp = nullptr;
  if (!(t.qp->access_flags & access::kRemoteRead) ||
      !(mrp = target_mr(x, rkey, raddr, len, access::kRemoteRead, &buf))) {
    target_error(t, AsyncEvent::kQpAccessErr);
    return Resp::kRemAccess;
  }
  const MrView& mr = *mrp;
  const uint64_t va = mr.vaddr + (raddr - mr.iova);
  if (uint8_t* p = mapped(x, mr, rkey, va, len)) {
    iovec here{p, size_t(len)};
    link::copy_local(dst, ndst, &here, 1);
    return Resp::kOk;
  }
  iovec src{reinterpret_cast<void*>(va), size_t(len)};
  int rc = link::copy_from_peer(x.seg->pid, dst, ndst, &src, 1);
  if (rc == -ESRCH) return Resp::kNoAnswer;
  if (rc != 0) {
    target_error(t, AsyncEvent::kQpAccessErr);
    return Resp::kRemAccess;
  }
  return Resp::kOk;
}

Resp respond_atomic(const PeerQp& t, HostShm* host, link::AtomicOp op, uint64_t raddr, uint32_t rkey,
                    uint64_t compare_add, uint64_t swap, uint64_t* orig, uint32_t xrc_srqn) {
  if (!receiving(t)) return Resp::kNoAnswer;
  Rx x;
  if (!rx_of(t, xrc_srqn, &x)) return Resp::kRemInvReq;
  if (raddr & 7) {
    // IBA 9.4.5: atomics need 8-byte alignment -> invalid request.
    target_error(t, AsyncEvent::kQpReqErr);
    return Resp::kRemInvReq;
  }
  const uint32_t need = op == link::AtomicOp::kStore ? access::kRemoteWrite : access::kRemoteAtomic;
  MrView buf;
  const MrView* mrp = nullptr;
  if (!(t.qp->access_flags & need) || !(mrp = target_mr(x, rkey, raddr, 8, need, &buf))) {
    target_error(t, AsyncEvent::kQpAccessErr);
    return Resp::kRemAccess;
  }
  const MrView& mr = *mrp;
  const uint64_t va = mr.vaddr + (raddr - mr.iova);
  if (va & 7) {
    // An aligned iova over a misaligned buffer (a zero-based region): the
    // host's 8-byte store or locked instruction would not be one access.
    target_error(t, AsyncEvent::kQpReqErr);
    return Resp::kRemInvReq;
  }
  auto* here = reinterpret_cast<uint64_t*>(mapped(x, mr, rkey, va, 8));
  uint64_t old = 0;
  const int rc =
      link::atomic_on_peer(host->stripes, x.seg->pid, va, here, op, compare_add, swap, orig ? orig : &old);
  if (rc == -ESRCH) return Resp::kNoAnswer;
  if (rc != 0) {
    target_error(t, AsyncEvent::kQpAccessErr);
    return Resp::kRemOp;
  }
  return Resp::kOk;
}

}  // namespace uroce::core
