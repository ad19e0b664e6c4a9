#include "core/shm_engine.h"

#include <cstring>

#include "common/clock.h"
#include "common/iov.h"
#include "contract/limits.h"
#include "core/eager.h"
#include "core/service.h"
#include "memory/target.h"
#include "memory/trace.h"
#include "wire/grh.h"
#include "wire/ip_udp.h"
#include "wire/opcodes.h"

namespace uroce::core {

namespace {

constexpr uint64_t kInfiniteRetryPollNs = 10000000;  // timeout 0: keep trying every 10 ms

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

const PeerQp* ShmEngine::peer_for(uint32_t qpn, PeerQp* tmp) {
  if (type_ != QpType::kUd && peer_.qpn == qpn && peer_.valid()) return &peer_;
  auto r = PeerMap::get().resolve(qpn);
  if (!r.is_ok()) return nullptr;
  PeerQp* dst = type_ != QpType::kUd ? &peer_ : tmp;
  *dst = r.value();
  return dst;
}

void ShmEngine::post(const SendWqe& w) {
  lock_.assert_held();
  const QpState st = state();
  if (st == QpState::kErr || st == QpState::kSqe) {
    flush();  // what waits completes first: completions keep the order of posting
    complete(w, WcStatus::kWrFlushErr, 0);
    return;
  }
  if (!deferred_.empty() || st == QpState::kSqd) {
    defer(w, Exec::kNoResponse, ExecOut{});
    deferred_.back().next_try_ns = 0;  // queued, not yet tried
    return;
  }
  if (w.opcode == WrOpcode::kRdmaWrite && write_direct(w)) return;
  ExecOut out;
  const Exec r = execute(w, &out);
  if (r == Exec::kDone) {
    if (out.status == WcStatus::kSuccess)
      complete(w, out.status, out.byte_len);
    else
      fail(w, out.status);
    return;
  }
  if (r == Exec::kRnr && transport::RetryBudget(transport::RetryRule::kRnr).exhausted(attr_.rnr_retry)) {
    fail(w, WcStatus::kRnrRetryExcErr);
    return;
  }
  defer(w, r, out);
}

void ShmEngine::defer(const SendWqe& w, Exec why, const ExecOut& o) {
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

bool ShmEngine::progress() {
  Guard<AdaptiveLock> g(lock_);
  bool more = progress_locked();
  if (!more) wants_service_.store(false, std::memory_order_release);
  return more;
}

bool ShmEngine::progress_locked() {
  const QpState st = state();
  if (st == QpState::kErr || st == QpState::kSqe) {
    flush();  // moved to ERR elsewhere (a responder error found by a peer or a poll)
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
    if (timed && !d.rnr && d.next_try_ns != 0 && attr_.timeout != 0 && d.retries.exhausted(attr_.retry_cnt)) {
      fail_front(WcStatus::kRetryExcErr);
      return false;
    }
    ExecOut out;
    Exec r = execute(d.w, &out);
    if (r == Exec::kDone) {
      if (out.status != WcStatus::kSuccess) {
        fail_front(out.status);
        return false;
      }
      complete(d.w, out.status, out.byte_len);
      deferred_.pop_front();
      continue;
    }
    if (r == Exec::kRnr) {
      d.rq_tail_seen = out.rq_tail;
      if (!timed && d.rnr) return true;  // an early try that lost the race: not a retry
      // IBA 9.7.5.2.8: after rnr_retry retries the WQE fails (7: never).
      if (d.rnr) d.rnr_retries.count();
      if (d.rnr_retries.exhausted(attr_.rnr_retry)) {
        fail_front(WcStatus::kRnrRetryExcErr);
        return false;
      }
      d.rnr = true;
      d.next_try_ns = now + rnr_timer_ns(out.rnr_timer);
      return true;
    }
    // No response: IBA 9.7.6.1.3, retry on the local ACK timeout up to retry_cnt times.
    if (!timed) return true;
    if (d.next_try_ns != 0) d.retries.count();
    uint64_t t = ack_timeout_ns(attr_.timeout);
    d.rnr = false;
    d.next_try_ns = now + (t ? t : kInfiniteRetryPollNs);
    return true;
  }
  return false;
}

void ShmEngine::complete(const SendWqe& w, WcStatus st, uint32_t byte_len) {
  const bool signaled = (w.flags & send_flags::kSignaled) || st != WcStatus::kSuccess;
  owner_.completed(w.wr_id, wc_opcode_of(w.opcode), st, byte_len, signaled, &unsignaled_);
}

void ShmEngine::fail(const SendWqe& w, WcStatus st) {
  complete(w, st, 0);  // the QP is in ERR before this completion can be seen
  flush();
  owner_.failed(QpFailure{false, AsyncEvent::kQpFatal, "error completion"});
}

void ShmEngine::fail_front(WcStatus st) {
  complete(deferred_.front().w, st, 0);
  deferred_.pop_front();
  flush();
  owner_.failed(QpFailure{false, AsyncEvent::kQpFatal, "error completion"});
}

void ShmEngine::flush() {
  lock_.assert_held();
  // (The deferred WQE's buffers live in the deque: each completes before it goes.)
  while (!deferred_.empty()) {
    complete(deferred_.front().w, WcStatus::kWrFlushErr, 0);
    deferred_.pop_front();
  }
}

void ShmEngine::drain(bool on) {
  lock_.assert_held();
  if (on) {
    // Work executes at post time or waits deferred: nothing is in flight.
    owner_.drained();
  } else if (!deferred_.empty()) {
    // Work held while drained resumes.
    wants_service_.store(true, std::memory_order_release);
    Service::get().add_deferred(this);
  }
}

void ShmEngine::reset() {
  lock_.assert_held();
  deferred_.clear();
  unsignaled_ = 0;
  peer_ = PeerQp{};
}

ShmEngine::Exec ShmEngine::execute(const SendWqe& w, ExecOut* out) {
  if (w.opcode == WrOpcode::kBindMw || w.opcode == WrOpcode::kLocalInv) {
    // Local operations: the QP's own NIC acts on its context's MR table.
    out->status = owner_.local_op(w);
    return Exec::kDone;
  }
  iovec loc[kLimits.max_sge];
  size_t nl = 0;
  uint64_t len = 0;
  if (WcStatus ls = owner_.check_local(w, loc, &nl, &len); ls != WcStatus::kSuccess) {
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
      const auto op =
          w.opcode == WrOpcode::kAtomicCmpAndSwp ? link::AtomicOp::kCmpSwap : link::AtomicOp::kFetchAdd;
      r = core::respond_atomic(t, ctx_->host(), op, w.remote_addr, w.rkey, w.compare_add, w.swap, &orig,
                               w.xrc_srqn);
      if (r == Resp::kOk) memcpy(loc[0].iov_base, &orig, 8);
      len = 8;
      break;
    }
    case WrOpcode::kAtomicWrite: {
      uint64_t v = 0;
      iov_read({loc, nl}, 0, 8, reinterpret_cast<uint8_t*>(&v));
      r = core::respond_atomic(t, ctx_->host(), link::AtomicOp::kStore, w.remote_addr, w.rkey, 0, v, nullptr,
                               w.xrc_srqn);
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

}  // namespace uroce::core
