#include "core/eager.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/cq.h"
#include "core/qp.h"
#include "core/qp_state.h"
#include "memory/cq_ring.h"
#include "memory/notify.h"
#include "memory/rq_ring.h"
#include "memory/trace.h"

namespace uroce::core {

namespace {

/// Wakes the receiver's completion channel if it is armed for this record
/// (the producer's half of the arm protocol, as cq_push does it).
void eager_notify(CqRing* cq, bool solicited) {
  if (cq_producer_must_fence()) std::atomic_thread_fence(std::memory_order_seq_cst);
  const uint32_t armed = cq->armed.load(std::memory_order_relaxed);
  if (armed == 0 || (armed == kArmSolicited && !solicited)) return;
  if (cq->armed.exchange(0, std::memory_order_seq_cst) != 0) cq_notify(cq);
}

void publish(EagerRec* rec, uint64_t pos) {
  std::atomic_ref<uint32_t>(rec->seq).store(uint32_t(pos + 1),
                                            std::memory_order_release);  // pairs with eager_next
}

}  // namespace

bool eager_enabled() {
  static const bool on = [] {
    const char* v = getenv("UROCE_EAGER");
    return !(v && strcmp(v, "0") == 0);
  }();
  return on;
}

uint32_t eager_ring_records(uint32_t max_recv_wr) {
  uint32_t n = 16;
  while (n < max_recv_wr && n < kEagerMaxRecords) n <<= 1;
  return n;
}

bool eager_send(const PeerQp& t, const iovec* src, size_t nsrc, uint64_t len, const RecvMeta& m, Resp* resp) {
  EagerRing* g = t.eager;
  if (!g || len > kEagerPayload || len + 1 > g->limit.load(std::memory_order_relaxed)) return false;
  if (!t.valid() || !state_can_receive(QpState(t.qp->state.load(std::memory_order_acquire)))) return false;
  // No receive known (the private copy of the tail says none, and so does
  // the tail): the usual delivery answers RNR, with no record spent.
  if (t.rq->head.load(std::memory_order_relaxed) >= t.rq_tail_seen) {
    t.rq_tail_seen = t.rq->tail.load(std::memory_order_acquire);  // pairs with rq_post's release
    if (t.rq->head.load(std::memory_order_relaxed) >= t.rq_tail_seen) return false;
  }
  // A record first: room is what the receiver has read (its count is
  // loaded only when the private copy says "full").
  const uint32_t size = t.eager_mask + 1;
  uint64_t p = g->prod.load(std::memory_order_relaxed);
  for (;;) {
    if (p - t.eager_cons_seen >= size) {
      t.eager_cons_seen = g->cons.load(std::memory_order_acquire);  // pairs with eager_next's release
      if (p - t.eager_cons_seen >= size) return false;
    }
    if (g->prod.compare_exchange_weak(p, p + 1, std::memory_order_acq_rel)) break;
  }
  EagerRec* rec = eager_rec(g, t.eager_mask, p);
  uint64_t pos = 0;
  if (!rq_claim_pos(t.rq, &pos, &t.rq_tail_seen, &t.seg->bound)) {
    rec->op = kEagerSkip;  // no receive: the usual delivery answers RNR
    publish(rec, p);
    return false;
  }
  // The receive is ours. Its size and keys were vouched for by `limit` as
  // it stood when the receive was posted, which this load sees (it follows
  // the tail's acquire that made the receive visible).
  if (len + 1 > g->limit.load(std::memory_order_acquire)) {
    rec->op = kEagerSkip;
    publish(rec, p);
    Rx x;
    if (!rx_of(t, 0, &x)) return false;
    const RqGeometry geo = rq_geometry(t.rq);
    if (!rq_geometry_ok(geo, &t.seg->bound)) {
      t.seg->bound.set_corrupt("a receive queue outside the segment");
      *resp = Resp::kNoAnswer;
      return true;
    }
    ClaimedRecv r;
    rq_copy(t.seg->base, geo, pos, &r);
    *resp = deliver_send(t, x, r, src, nsrc, len, m);
    return true;
  }
  rec->rq_pos = uint32_t(pos);
  rec->imm = m.imm;
  rec->len = uint8_t(len);
  rec->op = m.has_imm ? kEagerSendImm : kEagerSend;
  rec->flags = m.solicited ? kEagerSolicited : 0;
  uint8_t* d = rec->data;
  for (size_t i = 0; i < nsrc; ++i) {
    memcpy(d, src[i].iov_base, src[i].iov_len);
    d += src[i].iov_len;
  }
  publish(rec, p);
  eager_notify(t.rcq, m.solicited);
  *resp = Resp::kOk;
  return true;
}

bool eager_next(Context* ctx, EagerRx& e, Cqe* c) {
  EagerRing* g = e.ring.load(std::memory_order_relaxed);
  if (!g) return false;
  uint64_t cons = e.cons.load(std::memory_order_relaxed);
  for (;;) {
    const EagerRec* rec = eager_rec(g, e.mask, cons);
    if (std::atomic_ref<const uint32_t>(rec->seq).load(std::memory_order_acquire) != uint32_t(cons + 1))
      return false;  // pairs with publish
    if (rec->op != kEagerSkip) break;
    e.cons.store(++cons, std::memory_order_relaxed);
    g->cons.store(cons, std::memory_order_release);  // pairs with eager_send's room check
  }
  const EagerRec* rec = eager_rec(g, e.mask, cons);
  const uint64_t pos = e.done.load(std::memory_order_relaxed);
  if (rec->rq_pos != uint32_t(pos)) return false;  // completions in the CQ ring come first
  const uint8_t op = rec->op;
  const uint32_t len = std::min<uint32_t>(rec->len, kEagerPayload), imm = rec->imm;
  uint8_t data[kEagerPayload];
  memcpy(data, rec->data, len);
  e.cons.store(cons + 1, std::memory_order_relaxed);
  g->cons.store(cons + 1, std::memory_order_release);  // the record is read: the sender may reuse it

  // The receive: the QP's own ring and region table, in this process.
  Segment& seg = ctx->seg();
  const RqGeometry geo = rq_geometry(e.rq);
  *c = Cqe{};
  c->opcode = uint32_t(WcOpcode::kRecv);
  c->qp_num = e.qpn;
  c->src_qp = e.shm->dest_qpn;
  c->byte_len = len;
  if (op == kEagerSendImm) {
    c->imm = imm;
    c->wc_flags = wc_flags::kWithImm;
  }
  WcStatus st = WcStatus::kSuccess;
  AsyncEvent ev = AsyncEvent::kQpAccessErr;
  if (!rq_geometry_ok(geo, &seg.bound())) {
    st = WcStatus::kLocQpOpErr;
  } else {
    const RqWqe* w =
        reinterpret_cast<const RqWqe*>(seg.base() + geo.slots_off + (pos & geo.mask) * uint64_t(geo.stride));
    c->wr_id = w->wr_id;
    uint32_t n = std::min(w->num_sge, std::min<uint32_t>(geo.max_sge, 32));
    // Scatter: the keys are checked again (the region may have gone since
    // the receive was posted), then the bytes copied; the pieces past the
    // message's end are not looked at (as memory/target.cc deliver_send).
    uint32_t left = len, cap = 0;
    const uint8_t* from = data;
    for (uint32_t i = 0; i < n && left > 0; ++i) {
      const Sge& s = w->sge[i];
      if (s.length == 0) continue;
      const MrView* mr = mr_read_cached(ctx->mr_entry(s.lkey), s.lkey, &e.mr_cache);
      if (!mr || mr->pd_id != e.shm->pd_id || !(mr->access & access::kLocalWrite) ||
          (mr->access & access::kWindow) || !mr_contains(*mr, s.addr, s.length)) {
        st = WcStatus::kLocProtErr;
        break;
      }
      cap += s.length;
      const uint32_t k = std::min(left, s.length);
      if (k) memcpy(reinterpret_cast<void*>(mr->vaddr + (s.addr - mr->iova)), from, k);
      from += k;
      left -= k;
    }
    if (st == WcStatus::kSuccess && left) {
      st = WcStatus::kLocLenErr;  // IBA 9.9.3.1.2.1
      ev = AsyncEvent::kQpReqErr;
    }
  }
  e.done.store(pos + 1, std::memory_order_release);  // pairs with rq_post's load: the slot is free
  if (tracing())
    trace(e.qpn, "recv completion wr_id=%llu %s %s len=%u (one-line record)", (unsigned long long)c->wr_id,
          wc_opcode_name(WcOpcode(c->opcode)), wc_status_str(uint32_t(st)), len);
  if (st != WcStatus::kSuccess) {
    c->status = uint32_t(st);
    c->byte_len = 0;
    c->wc_flags = 0;
    e.qp->responder_error(ev);
  }
  return true;
}

}  // namespace uroce::core
