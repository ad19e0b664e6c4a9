// The send side of a QP on the intra-host link: requester (executes WQEs in
// order, at post time when nothing is deferred) and completer (send CQEs,
// RNR and retry budgets, flushing). Queues behind the first WQE that must
// wait, so order is kept (IBA 9.5: a QP executes its send queue in order).
#include <cstring>

#include "common/clock.h"
#include "core/eager.h"
#include "core/limits.h"
#include "core/qp.h"
#include "core/qp_state.h"
#include "core/service.h"
#include "core/target.h"
#include "core/trace.h"
#include "core/wr.h"
#include "transport/timers.h"
#include "wire/grh.h"
#include "wire/ip_udp.h"
#include "wire/opcodes.h"

namespace uroce::core {

namespace {

constexpr uint64_t kInfiniteRetryPollNs = 10000000;  // timeout 0: keep trying every 10 ms

/// WR opcode legality per QP type (IBA 10.7.3 / rdma-core man ibv_post_send).
bool opcode_ok(QpType t, WrOpcode op) {
  switch (op) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
      return true;
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return t == QpType::kRc || t == QpType::kUc || t == QpType::kXrcSend;
    case WrOpcode::kRdmaRead:
    case WrOpcode::kAtomicCmpAndSwp:
    case WrOpcode::kAtomicFetchAndAdd:
    case WrOpcode::kSendWithInv:
      return t == QpType::kRc || t == QpType::kXrcSend;
    case WrOpcode::kBindMw:
    case WrOpcode::kLocalInv:
      // Memory windows are bound and invalidated through connected QPs.
      return t == QpType::kRc || t == QpType::kUc || t == QpType::kXrcSend;
    default:
      return false;
  }
}

bool is_atomic(WrOpcode op) { return op == WrOpcode::kAtomicCmpAndSwp || op == WrOpcode::kAtomicFetchAndAdd; }

/// The 40 bytes a UD receive sees ahead of the payload: the GRH of the
/// RoCE v2 packet a network link would have carried (wire/grh.h).
void build_grh(const DeviceInfo& dev, const AddressVector& av, uint32_t payload, uint8_t* grh) {
  const uint8_t* sgid = dev.gids[av.sgid_index < dev.num_gids ? av.sgid_index : 0];
  static const uint8_t kV4Prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  const uint8_t hop_limit = av.hop_limit ? av.hop_limit : 64;
  // What follows the IP header: UDP, BTH, DETH, payload, ICRC.
  const uint32_t after_ip = 8 + wire::kBthBytes + 8 + payload + wire::kIcrcBytes;
  if (memcmp(av.dgid, kV4Prefix, 12) == 0) {
    wire::Ipv4UdpFields f;
    memcpy(&f.src, sgid + 12, 4);
    memcpy(&f.dst, av.dgid + 12, 4);
    f.tos = av.traffic_class;
    f.ttl = hop_limit;
    uint8_t ip[20], udp[8];
    wire::build_ipv4_udp(f, after_ip - 8, nullptr, ip, udp);
    wire::grh_from_ipv4(ip, grh);
  } else {
    wire::grh_ipv6(av.traffic_class, av.flow_label, uint16_t(after_ip), hop_limit, sgid, av.dgid, grh);
  }
}

}  // namespace

const PeerQp* Qp::peer_for(uint32_t qpn, PeerQp* tmp) {
  if (type_ != QpType::kUd && peer_.qpn == qpn && peer_.valid()) return &peer_;
  auto r = PeerMap::get().resolve(qpn);
  if (!r.is_ok()) return nullptr;
  PeerQp* dst = type_ != QpType::kUd ? &peer_ : tmp;
  *dst = r.value();
  return dst;
}

Status Qp::post_send(const SendWqe& w) {
  if (tracing()) {
    uint64_t len = 0;
    for (uint32_t i = 0; i < w.num_sge; ++i) len += w.sge[i].length;
    trace(qpn_, "post_send wr_id=%llu %s len=%llu%s%s", (unsigned long long)w.wr_id, wr_opcode_name(w.opcode),
          (unsigned long long)len, w.flags & send_flags::kSignaled ? " signaled" : "",
          w.flags & send_flags::kInline ? " inline" : "");
  }
  std::lock_guard<AdaptiveLock> g(sq_mu_);
  if (!send_cq_) return Status(EINVAL);  // XRC target QPs have no send queue
  QpState st = state();
  if (st == QpState::kReset || st == QpState::kInit || st == QpState::kRtr) return Status(EINVAL);
  if (w.num_sge > cap_.max_send_sge) return Status(EINVAL);
  if (!opcode_ok(type_, w.opcode)) return Status(EINVAL);
  if (type_ == QpType::kUd && !w.av) return Status(EINVAL);
  if (w.flags & send_flags::kInline) {
    if (is_atomic(w.opcode) || w.opcode == WrOpcode::kRdmaRead) return Status(EINVAL);
    uint64_t len = 0;
    for (uint32_t i = 0; i < w.num_sge; ++i) len += w.sge[i].length;
    if (len > cap_.max_inline_data) return Status(EINVAL);
  }
  const uint32_t posted = sq_posted_.load(std::memory_order_relaxed);
  if (posted - sq_retired_.load(std::memory_order_relaxed) >= cap_.max_send_wr) return Status(ENOMEM);
  sq_posted_.store(posted + 1, std::memory_order_relaxed);
  if (st == QpState::kErr || st == QpState::kSqe) {
    complete_send(w, WcStatus::kWrFlushErr, 0);
    return Status::ok();
  }
  if (net_) {
    if (type_ != QpType::kUd) return net_post(w);
    if (ud_over_network(*w.av)) return net_post_ud(w);
  }
  if (!deferred_.empty() || st == QpState::kSqd) {
    defer(w, Exec::kNoResponse, ExecOut{});
    deferred_.back().next_try_ns = 0;  // queued, not yet tried
    deferred_.back().retries = 0;
    return Status::ok();
  }
  if (w.opcode == WrOpcode::kRdmaWrite && write_direct(w)) return Status::ok();
  ExecOut out;
  Exec r = execute(w, &out);
  if (r == Exec::kDone) {
    complete_send(w, out.status, out.byte_len);
    if (out.status != WcStatus::kSuccess) enter_error_st();
    return Status::ok();
  }
  if (r == Exec::kRnr && attr_.rnr_retry == 0) {
    complete_send(w, WcStatus::kRnrRetryExcErr, 0);
    enter_error_st();
    return Status::ok();
  }
  defer(w, r, out);
  return Status::ok();
}

void Qp::defer(const SendWqe& w, Exec why, const ExecOut& o) {
  Deferred d;
  d.w = w;
  if (w.flags & send_flags::kInline) {
    for (uint32_t i = 0; i < w.num_sge; ++i) {
      const uint8_t* p = reinterpret_cast<const uint8_t*>(w.sge[i].addr);
      d.data.insert(d.data.end(), p, p + w.sge[i].length);
    }
  } else {
    d.sge.assign(w.sge, w.sge + w.num_sge);
  }
  d.w.av = nullptr;  // only RC defers; UD never waits
  const uint64_t now = now_ns();
  if (why == Exec::kRnr) {
    d.rnr = true;
    d.rnr_retries = 0;
    d.next_try_ns = now + rnr_timer_ns(o.rnr_timer);
    d.rq_tail_seen = o.rq_tail;
  } else {
    uint64_t t = ack_timeout_ns(attr_.timeout);
    d.next_try_ns = now + (t ? t : kInfiniteRetryPollNs);
  }
  deferred_.push_back(std::move(d));
  Deferred& b = deferred_.back();
  if (!b.data.empty() || (w.flags & send_flags::kInline)) {
    b.sge.assign(1, Sge{reinterpret_cast<uint64_t>(b.data.data()), uint32_t(b.data.size()), 0});
  }
  b.w.sge = b.sge.data();
  b.w.num_sge = uint32_t(b.sge.size());
  if (state() != QpState::kSqd) {
    wants_service_.store(true, std::memory_order_release);  // before add_deferred: see Service::poke
    Service::get().add_deferred(this);
  }
}

bool Qp::progress() {
  std::lock_guard<AdaptiveLock> g(sq_mu_);
  bool more = progress_st();
  if (!more) wants_service_.store(false, std::memory_order_release);
  return more;
}

bool Qp::progress_st() {
  QpState st = state();
  if (st == QpState::kErr || st == QpState::kSqe) {
    if (attr_.state != QpState::kErr) enter_error_st();
    flush_sq_st();
    return false;
  }
  if (st == QpState::kSqd || st == QpState::kReset) return false;
  while (!deferred_.empty()) {
    Deferred& d = deferred_.front();
    const uint64_t now = now_ns();
    bool timed = now >= d.next_try_ns;
    if (!timed) {
      if (!d.rnr) return true;
      PeerQp tmp;
      const PeerQp* p = peer_for(attr_.dest_qpn, &tmp);
      if (!p || core::target_rq_tail(*p, d.w.xrc_srqn) == d.rq_tail_seen) return true;
    }
    // IBA 9.7.6.1.3: the local ACK timer expired retry_cnt times: give up.
    if (timed && !d.rnr && d.next_try_ns != 0 && attr_.timeout != 0 && d.retries >= attr_.retry_cnt) {
      complete_send(d.w, WcStatus::kRetryExcErr, 0);
      deferred_.pop_front();
      enter_error_st();
      return false;
    }
    ExecOut out;
    Exec r = execute(d.w, &out);
    if (r == Exec::kDone) {
      complete_send(d.w, out.status, out.byte_len);
      deferred_.pop_front();
      if (out.status != WcStatus::kSuccess) {
        enter_error_st();
        return false;
      }
      continue;
    }
    if (r == Exec::kRnr) {
      d.rq_tail_seen = out.rq_tail;
      if (!timed && d.rnr) return true;  // an early try that lost the race: not a retry
      // IBA 9.7.5.2.8: after rnr_retry retries the WQE fails; 7 means retry forever.
      if (d.rnr) d.rnr_retries++;
      if (attr_.rnr_retry != 7 && d.rnr_retries >= attr_.rnr_retry) {
        complete_send(d.w, WcStatus::kRnrRetryExcErr, 0);
        deferred_.pop_front();
        enter_error_st();
        return false;
      }
      d.rnr = true;
      d.next_try_ns = now + rnr_timer_ns(out.rnr_timer);
      return true;
    }
    // No response: IBA 9.7.6.1.3, retry on the local ACK timeout up to retry_cnt times.
    if (!timed) return true;
    if (d.next_try_ns != 0) d.retries++;
    uint64_t t = ack_timeout_ns(attr_.timeout);
    d.rnr = false;
    d.next_try_ns = now + (t ? t : kInfiniteRetryPollNs);
    return true;
  }
  return false;
}

void Qp::complete_send(const SendWqe& w, WcStatus st, uint32_t byte_len) {
  const bool signaled = sq_sig_all_ || (w.flags & send_flags::kSignaled) || st != WcStatus::kSuccess;
  send_cqe(w.wr_id, wc_opcode_of(w.opcode), st, byte_len, signaled, &unsignaled_);
}

void Qp::send_cqe(uint64_t wr_id, WcOpcode op, WcStatus st, uint32_t byte_len, bool signaled,
                  uint32_t* unsignaled) {
  if (tracing())
    trace(qpn_, "send completion wr_id=%llu %s %s len=%u%s", (unsigned long long)wr_id, wc_opcode_name(op),
          wc_status_str(uint32_t(st)), byte_len,
          signaled || st != WcStatus::kSuccess ? "" : " (unsignaled: no CQE)");
  if (st != WcStatus::kSuccess && st != WcStatus::kWrFlushErr) {
    // An error completion means the QP is in ERR (IBA 10.8.3): whoever polls
    // it and then queries the QP must find ERR, so the state goes first.
    uint32_t s = shm_->state.load(std::memory_order_acquire);
    while (s != uint32_t(QpState::kErr) &&
           !shm_->state.compare_exchange_weak(s, uint32_t(QpState::kErr), std::memory_order_acq_rel)) {
    }
  }
  if (!signaled) {
    ++*unsignaled;
    return;
  }
  Cqe c{};
  c.wr_id = wr_id;
  c.status = uint32_t(st);
  c.opcode = uint32_t(op);
  c.byte_len = byte_len;
  c.qp_num = qpn_;
  c.local_qp = local_id_;
  c.sq_retire = *unsignaled + 1;  // this WQE and the unsignaled ones before it
  *unsignaled = 0;
  send_cq_->push_local(c, true);
}

void Qp::flush_sq_st() {
  while (!deferred_.empty()) {
    complete_send(deferred_.front().w, WcStatus::kWrFlushErr, 0);
    deferred_.pop_front();
  }
}

WcStatus Qp::gather(const SendWqe& w, iovec* loc, size_t* nlp, uint64_t* lenp) {
  size_t nl = 0;
  uint64_t len = 0;
  const bool needs_local_write = w.opcode == WrOpcode::kRdmaRead || is_atomic(w.opcode);
  for (uint32_t i = 0; i < w.num_sge; ++i) {
    const Sge& s = w.sge[i];
    if (s.length == 0) continue;
    if (w.flags & send_flags::kInline) {
      loc[nl++] = iovec{reinterpret_cast<void*>(s.addr), s.length};
    } else {
      const MrView* mr = mr_read_cached(ctx_->mr_entry(s.lkey), s.lkey, &local_mr_cache_);
      // (A window's key is an R_Key only: never a local key, IBA 10.6.7.)
      if (!mr || mr->pd_id != pd_id_ || !mr_contains(*mr, s.addr, s.length) ||
          (mr->access & access::kWindow) || (needs_local_write && !(mr->access & access::kLocalWrite)))
        return WcStatus::kLocProtErr;
      loc[nl++] = iovec{reinterpret_cast<void*>(mr->vaddr + (s.addr - mr->iova)), s.length};
    }
    len += s.length;
  }
  *nlp = nl;
  *lenp = len;
  if (len > kLimits.max_msg_sz) return WcStatus::kLocLenErr;
  if (type_ == QpType::kUd && len > mtu_enum_to_bytes(active_mtu_enum(ctx_->dev().if_mtu)))
    return WcStatus::kLocLenErr;
  if (is_atomic(w.opcode) && (nl == 0 || loc[0].iov_len < 8)) return WcStatus::kLocLenErr;
  return WcStatus::kSuccess;
}

Qp::Exec Qp::execute(const SendWqe& w, ExecOut* out) {
  if (w.opcode == WrOpcode::kBindMw || w.opcode == WrOpcode::kLocalInv) {
    // Local operations: the QP's own NIC acts on its context's MR table.
    out->status = local_op(w);
    return Exec::kDone;
  }
  iovec loc[kLimits.max_sge];
  size_t nl = 0;
  uint64_t len = 0;
  if (WcStatus ls = gather(w, loc, &nl, &len); ls != WcStatus::kSuccess) {
    out->status = ls;
    return Exec::kDone;
  }
  const bool reliable = type_ == QpType::kRc || type_ == QpType::kXrcSend;
  // An XRC initiator talks to an XRC target QP (IBA 9.8); others to their own type.
  const QpType peer_type = type_ == QpType::kXrcSend ? QpType::kXrcRecv : type_;
  const uint32_t dst = type_ == QpType::kUd ? w.remote_qpn : attr_.dest_qpn;
  const PeerQp* p = peer_for(dst, &ud_peer_);
  // Unreliable transports: a request nobody answers is simply lost.
  if (!p || p->qp->qp_type != uint32_t(peer_type)) return reliable ? Exec::kNoResponse : Exec::kDone;
  // A connected QP uses its cached peer, whose private ring-index copies persist.
  const PeerQp& t = *p;
  RecvMeta m{};
  m.src_qpn = qpn_;
  m.imm = w.imm;
  m.solicited = (w.flags & send_flags::kSolicited) != 0;
  m.xrc_srqn = w.xrc_srqn;
  uint8_t grh[wire::kGrhBytes];
  if (type_ == QpType::kUd) {
    const uint32_t qkey = ud_send_qkey(w.remote_qkey, attr_.qkey);
    if (qkey != t.qp->qkey) return Exec::kDone;  // IBA C10-15: dropped silently
    build_grh(ctx_->dev(), *w.av, uint32_t(len), grh);
    m.with_grh = true;
    m.grh = grh;
  }
  RnrInfo rnr;
  Resp r = Resp::kOk;
  switch (w.opcode) {
    case WrOpcode::kSend:
      if (!t.eager || !eager_send(t, loc, nl, len, m, &r)) r = core::respond_send(t, loc, nl, len, m, &rnr);
      break;
    case WrOpcode::kSendWithInv:
      m.has_inv = true;
      m.inv_rkey = w.imm;
      r = core::respond_send(t, loc, nl, len, m, &rnr);
      break;
    case WrOpcode::kSendWithImm:
      m.has_imm = true;
      if (!t.eager || !eager_send(t, loc, nl, len, m, &r)) r = core::respond_send(t, loc, nl, len, m, &rnr);
      break;
    case WrOpcode::kRdmaWrite:
      r = core::respond_write(t, loc, nl, len, w.remote_addr, w.rkey, nullptr, &rnr, w.xrc_srqn);
      break;
    case WrOpcode::kRdmaWriteWithImm:
      m.has_imm = true;
      r = core::respond_write(t, loc, nl, len, w.remote_addr, w.rkey, &m, &rnr, w.xrc_srqn);
      break;
    case WrOpcode::kRdmaRead:
      r = core::respond_read(t, loc, nl, len, w.remote_addr, w.rkey, w.xrc_srqn);
      break;
    case WrOpcode::kAtomicCmpAndSwp:
    case WrOpcode::kAtomicFetchAndAdd: {
      uint64_t orig = 0;
      r = core::respond_atomic(t, ctx_->host(), w.opcode == WrOpcode::kAtomicCmpAndSwp, w.remote_addr, w.rkey,
                               w.compare_add, w.swap, &orig, w.xrc_srqn);
      if (r == Resp::kOk) memcpy(loc[0].iov_base, &orig, 8);
      len = 8;
      break;
    }
    default:
      out->status = WcStatus::kLocQpOpErr;
      return Exec::kDone;
  }
  switch (r) {
    case Resp::kOk:
      out->status = WcStatus::kSuccess;
      out->byte_len = uint32_t(len);
      return Exec::kDone;
    case Resp::kRnr:
      if (!reliable) return Exec::kDone;
      out->rnr_timer = rnr.rnr_timer;
      out->rq_tail = rnr.rq_tail;
      return Exec::kRnr;
    case Resp::kNoAnswer:
      return reliable ? Exec::kNoResponse : Exec::kDone;
    case Resp::kRemAccess:
      out->status = reliable ? WcStatus::kRemAccessErr : WcStatus::kSuccess;
      return Exec::kDone;
    case Resp::kRemInvReq:
      out->status = reliable ? WcStatus::kRemInvReqErr : WcStatus::kSuccess;
      return Exec::kDone;
    case Resp::kRemOp:
      out->status = reliable ? WcStatus::kRemOpErr : WcStatus::kSuccess;
      return Exec::kDone;
  }
  return Exec::kDone;
}

WcStatus Qp::local_op(const SendWqe& w) {
  if (w.opcode == WrOpcode::kLocalInv) return ctx_->local_invalidate(w.imm, pd_id_);
  return ctx_->bind_window(w.bind, pd_id_, qpn_);
}

}  // namespace uroce::core
