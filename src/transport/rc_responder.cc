#include "transport/rc_responder.h"

#include <algorithm>
#include <cstring>

#include "transport/psn.h"

namespace uroce::transport {

using namespace uroce::wire;

wire::Packet RcResponder::response(uint8_t op, uint32_t psn) const {
  Packet r;
  r.bth.opcode = opcode(service(), Op(op));
  r.bth.dest_qp = cfg_.dest_qp;
  r.bth.psn = psn & kPsnMask;
  return r;
}

void RcResponder::ack(uint32_t psn) {
  if (coalesce_) {
    ack_owed_ = true;
    owed_psn_ = psn;
    return;
  }
  Packet r = response(kAcknowledge, psn);
  r.syndrome = syndrome_ack(kCreditsInvalid);
  r.msn = msn_;
  ++stats_->acks;
  env_->send(r);
}

void RcResponder::nak(uint32_t psn, uint8_t syndrome) {
  Packet r = response(kAcknowledge, psn);
  r.syndrome = syndrome;
  r.msn = msn_;
  env_->send(r);
}

void RcResponder::fail(uint32_t psn, NakCode code, AsyncEvent ev) {
  ++(code == NakCode::kRemoteAccessError        ? stats_->access_naks
     : code == NakCode::kRemoteOperationalError ? stats_->op_naks
                                                : stats_->inv_req_naks);
  nak(psn, syndrome_nak(code));
  failed_ = true;
  env_->qp_error(ev);
}

void RcResponder::remember(const Replay& r) {
  replay_.push_back(r);
  while (replay_.size() > std::max<uint32_t>(cfg_.max_dest_rd_atomic, 1)) replay_.pop_front();
}

void RcResponder::on_request(const Packet& p) {
  if (failed_) {
    ++stats_->dropped;  // a QP in ERR answers nothing
    return;
  }
  ++stats_->packets;
  const OpInfo* info = op_info(p.bth.opcode);
  if (!info || !(info->flags & kRequest) || (p.bth.opcode >> 5) != uint8_t(service())) {
    ++stats_->dropped;
    return;
  }
  const int32_t d = psn_diff(p.bth.psn, epsn_);
  if (cfg_.lingering && (d >= 0 || (info->flags & (kReadOp | kAtomicOp)))) {
    ++stats_->dropped;
    return;
  }
  if (d < 0) {
    ++stats_->duplicates;
    duplicate(p, *info);
    return;
  }
  if (d > 0) {
    const bool kept = !rnr_pending_ && ooo_.put(p, epsn_);
    if (kept) ++stats_->ooo_kept;
    gap(p, kept);
    return;
  }
  in_order(p, *info);
}

void RcResponder::gap(const Packet& p, bool kept) {
  // 9.7.5.1.1: a gap: NAK it (an out-of-sequence request is a class B
  // error: NAK, nothing else; a packet kept in ooo_ is executed later). After
  // an RNR NAK the requester resends from epsn_ anyway, so what follows it
  // is dropped quietly. The NAK itself may be lost, and the requester then
  // waits for its timer (a lost NAK was most of the timeouts at 10 % loss),
  // so the NAK goes again: at once when the requester has gone back and
  // epsn_ is still missing (a PSN not above the last one seen past the gap:
  // its resend was lost too), and after 4, 8, 16, ... further packets while
  // new ones keep coming. The requester ignores repeats of a NAK within a
  // round trip of acting on it.
  bool send_nak = false;
  const bool resent = seq_nak_sent_ && psn_diff(p.bth.psn, gap_last_) <= 0;
  gap_last_ = p.bth.psn;
  if (rnr_pending_) {
    // quietly dropped (above)
  } else if (!seq_nak_sent_) {
    open_gap(p.bth.psn);
    send_nak = true;
  } else if (resent || ++gap_packets_ >= renak_at_) {
    if (!resent) renak_at_ *= 2;
    send_nak = true;
    ++stats_->seq_naks_repeated;
  }
  if (!send_nak) {
    if (!kept) ++stats_->dropped;
    return;
  }
  nak_gap();
}

void RcResponder::open_gap(uint32_t last_seen) {
  seq_nak_sent_ = true;
  gap_packets_ = 0;
  renak_at_ = kFirstRenak;
  gap_last_ = last_seen;
}

void RcResponder::nak_gap() {
  nak(epsn_, syndrome_nak(NakCode::kPsnSequenceError));
  ++stats_->seq_naks;
}

void RcResponder::in_order(const Packet& p, const OpInfo& info) {
  seq_nak_sent_ = false;
  rnr_pending_ = false;
  if (ooo_.empty()) {
    accept(p, info);
    return;
  }
  // The gap fills: what was kept behind it follows, in order, as if it had
  // just arrived, with one ACK for all of it at the end.
  // The ACK covers the last SEND or WRITE packet executed, whether or not
  // it asked (a READ's responses or an atomic's ACK after it cover it too).
  coalesce_ = true;
  ack_owed_ = false;
  auto take_in = [this](const Packet& x, const OpInfo& xi) {
    accept(x, xi);
    if (!failed_ && !rnr_pending_ && (xi.flags & (kSendOp | kWriteOp | kAtomicWriteOp))) {
      ack_owed_ = true;
      owed_psn_ = x.bth.psn;
    }
  };
  take_in(p, info);
  while (!failed_ && !rnr_pending_) {
    const Packet* q = ooo_.take(epsn_);
    if (!q) break;
    ++stats_->ooo_replayed;
    take_in(*q, *op_info(q->bth.opcode));
  }
  coalesce_ = false;
  if (failed_ || rnr_pending_) {
    ooo_.clear();  // the requester resends from the RNR NAK's PSN; an error ends everything
    return;
  }
  ooo_.drop_before(epsn_);
  if (!ooo_.empty()) {
    // Another gap, with packets kept past it: NAK it now (the NAK
    // acknowledges everything before it).
    open_gap(epsn_);
    nak_gap();
  } else if (ack_owed_) {
    ack(owed_psn_);
  }
}

void RcResponder::accept(const Packet& p, const OpInfo& info) {
  const uint8_t op = p.bth.opcode & 0x1f;
  if (!opcode_follows(prev_op_, op)) {
    fail(p.bth.psn, NakCode::kInvalidRequest, AsyncEvent::kQpReqErr);  // 9.7.5.1.1 C9-90
    return;
  }
  execute(p, info);
}

void RcResponder::execute(const Packet& p, const OpInfo& info) {
  if (info.flags & kSendOp) return do_send(p, info);
  if (info.flags & kWriteOp) return do_write(p, info);
  if (info.flags & kReadOp) return do_read(p);
  if (info.flags & kAtomicOp) return do_atomic(p);
  if (info.flags & kAtomicWriteOp) return do_atomic_write(p);
  ++stats_->dropped;
}

void RcResponder::do_send(const Packet& p, const OpInfo& info) {
  const uint8_t op = p.bth.opcode & 0x1f;
  if (info.flags & (kFirst | kOnly)) {
    if (!env_->claim_recv(&recv_)) {
      // 9.7.5.2.8: no receive WQE: RNR NAK; the requester retries the message.
      nak(p.bth.psn, syndrome_rnr_nak(cfg_.min_rnr_timer));
      rnr_pending_ = true;
      ++stats_->rnr_naks;
      return;
    }
    recv_offset_ = 0;
  }
  Access a = env_->place_recv(recv_, recv_offset_, p.payload);
  if (a != Access::kOk) {
    // A message longer than the receive buffers (or buffers the QP cannot
    // write): the receive completes in error and the request is invalid.
    env_->complete_recv(recv_, a == Access::kLengthError ? WcStatus::kLocLenErr : WcStatus::kLocProtErr, 0,
                        {});
    fail(p.bth.psn, a == Access::kLengthError ? NakCode::kInvalidRequest : NakCode::kRemoteOperationalError,
         a == Access::kLengthError ? AsyncEvent::kQpReqErr : AsyncEvent::kQpAccessErr);
    return;
  }
  recv_offset_ += p.payload.size();
  epsn_ = psn_add(epsn_, 1);
  prev_op_ = op;
  if (info.flags & (kLast | kOnly)) {
    RecvInfo ri;
    ri.has_imm = info.flags & kHasImm;
    ri.imm = p.imm;
    ri.has_inv = info.flags & kHasInv;
    ri.inv_rkey = p.inv_rkey;
    ri.solicited = p.bth.solicited;
    if (ri.has_inv && !env_->invalidate(ri.inv_rkey)) {
      // No window of this QP's by that key: the receive completes in
      // error (as rxe completes it) and the request is invalid.
      env_->complete_recv(recv_, WcStatus::kRemInvReqErr, 0, {});
      fail(p.bth.psn, NakCode::kInvalidRequest, AsyncEvent::kQpReqErr);
      return;
    }
    msn_ = psn_add(msn_, 1);
    env_->complete_recv(recv_, WcStatus::kSuccess, uint32_t(recv_offset_), ri);
  }
  if (p.bth.ack_req) ack(p.bth.psn);
}

void RcResponder::do_write(const Packet& p, const OpInfo& info) {
  const uint8_t op = p.bth.opcode & 0x1f;
  if (info.flags & (kFirst | kOnly)) {
    write_left_ = write_len_ = p.dma_len;
    write_at_ = nullptr;
    if (p.dma_len) {
      write_at_ = env_->remote_memory(p.rkey, p.va, p.dma_len, access::kRemoteWrite);
      if (!write_at_) {
        fail(p.bth.psn, NakCode::kRemoteAccessError, AsyncEvent::kQpAccessErr);  // 9.7.5.1.3
        return;
      }
    }
  }
  // 9.7.5.1.3: the packets must carry exactly the RETH's DMA length.
  const bool ends = info.flags & (kLast | kOnly);
  if (p.payload.size() > write_left_ || (ends && p.payload.size() != write_left_)) {
    fail(p.bth.psn, NakCode::kInvalidRequest, AsyncEvent::kQpReqErr);
    return;
  }
  RecvTarget imm_recv{};
  if (ends && (info.flags & kHasImm) && !env_->claim_recv(&imm_recv)) {
    nak(p.bth.psn, syndrome_rnr_nak(cfg_.min_rnr_timer));
    rnr_pending_ = true;
    ++stats_->rnr_naks;
    return;  // nothing written: the retry writes the same bytes
  }
  if (!p.payload.empty()) {
    std::copy(p.payload.begin(), p.payload.end(), write_at_);
    write_at_ += p.payload.size();
  }
  write_left_ -= p.payload.size();
  epsn_ = psn_add(epsn_, 1);
  prev_op_ = op;
  if (ends) {
    msn_ = psn_add(msn_, 1);
    if (info.flags & kHasImm) {
      RecvInfo ri;
      ri.opcode = WcOpcode::kRecvRdmaWithImm;
      ri.has_imm = true;
      ri.imm = p.imm;
      ri.solicited = p.bth.solicited;
      env_->complete_recv(imm_recv, WcStatus::kSuccess, write_len_, ri);  // byte_len: the WRITE's length
    }
  }
  if (p.bth.ack_req) ack(p.bth.psn);
}

bool RcResponder::read_responses(uint32_t first_psn, uint64_t va, uint32_t rkey, uint32_t len, uint32_t msn) {
  const uint8_t* src = len ? env_->remote_memory(rkey, va, len, access::kRemoteRead) : nullptr;
  if (len && !src) return false;
  const uint32_t n = packets_for(MsgKind::kReadResponse, len, cfg_.pmtu);
  ack_owed_ = false;  // the responses acknowledge every request before them
  for (uint32_t i = 0; i < n; ++i) {
    PacketSpan s = packet_of(MsgKind::kReadResponse, len, cfg_.pmtu, i);
    Packet r = response(s.op, psn_add(first_psn, i));
    r.syndrome = syndrome_ack(kCreditsInvalid);
    r.msn = msn;
    if (src) r.payload = std::span<const uint8_t>(src + s.offset, s.len);
    env_->send(r);
  }
  return true;
}

void RcResponder::do_read(const Packet& p) {
  if (!read_responses(p.bth.psn, p.va, p.rkey, p.dma_len, psn_add(msn_, 1))) {
    fail(p.bth.psn, NakCode::kRemoteAccessError, AsyncEvent::kQpAccessErr);
    return;
  }
  msn_ = psn_add(msn_, 1);
  remember(Replay{p.bth.psn, false, p.va, p.rkey, p.dma_len, 0, msn_});
  epsn_ = psn_add(epsn_, psns_for(MsgKind::kReadRequest, p.dma_len, cfg_.pmtu));
  prev_op_ = p.bth.opcode & 0x1f;
}

void RcResponder::do_atomic(const Packet& p) {
  if (p.va & 7) {
    fail(p.bth.psn, NakCode::kInvalidRequest, AsyncEvent::kQpReqErr);  // 9.4.5: 8-byte aligned
    return;
  }
  uint8_t* at = env_->remote_memory(p.rkey, p.va, 8, access::kRemoteAtomic);
  if (!at) {
    fail(p.bth.psn, NakCode::kRemoteAccessError, AsyncEvent::kQpAccessErr);
    return;
  }
  const bool cas = (p.bth.opcode & 0x1f) == kCompareSwap;
  const uint64_t orig = env_->atomic(at, cas, cas ? p.compare : p.swap_add, p.swap_add);
  msn_ = psn_add(msn_, 1);
  remember(Replay{p.bth.psn, true, p.va, p.rkey, 8, orig, msn_});
  Packet r = response(kAtomicAcknowledge, p.bth.psn);
  r.syndrome = syndrome_ack(kCreditsInvalid);
  r.msn = msn_;
  r.atomic_orig = orig;
  ack_owed_ = false;  // the atomic ACK acknowledges every request before it
  env_->send(r);
  epsn_ = psn_add(epsn_, 1);
  prev_op_ = p.bth.opcode & 0x1f;
}

void RcResponder::do_atomic_write(const Packet& p) {
  // IBA 1.5 ATOMIC WRITE: exactly 8 bytes to an 8-byte aligned address (an
  // invalid request otherwise, as rxe answers), where the QP may write;
  // stored at once, after what came before it; answered by an ACK. A
  // duplicate is acknowledged, never stored again (duplicate()).
  if (p.dma_len != 8 || p.payload.size() != 8 || (p.va & 7)) {
    fail(p.bth.psn, NakCode::kInvalidRequest, AsyncEvent::kQpReqErr);
    return;
  }
  uint8_t* at = env_->remote_memory(p.rkey, p.va, 8, access::kRemoteWrite);
  if (!at) {
    fail(p.bth.psn, NakCode::kRemoteAccessError, AsyncEvent::kQpAccessErr);
    return;
  }
  if (reinterpret_cast<uintptr_t>(at) & 7) {  // a region whose I/O address is not its address mod 8
    fail(p.bth.psn, NakCode::kInvalidRequest, AsyncEvent::kQpReqErr);
    return;
  }
  uint64_t v;
  std::memcpy(&v, p.payload.data(), 8);
  env_->atomic_store(at, v);
  epsn_ = psn_add(epsn_, 1);
  msn_ = psn_add(msn_, 1);
  prev_op_ = p.bth.opcode & 0x1f;
  if (p.bth.ack_req) ack(p.bth.psn);
}

void RcResponder::duplicate(const Packet& p, const OpInfo& info) {
  if (info.flags & (kReadOp | kAtomicOp)) {
    // 9.7.5.2.4 / 9.7.5.2.6: a READ is executed again (the memory may have
    // changed; what the requester gets is what is there now); an atomic is
    // never executed twice: its first result is sent again.
    for (const Replay& r : replay_) {
      if (r.atomic != bool(info.flags & kAtomicOp)) continue;
      // A READ may be asked for again from the middle (the requester lost a
      // response packet): any PSN of the original's range names it.
      const int32_t in = psn_diff(p.bth.psn, r.psn);
      const uint32_t span = r.atomic ? 1 : psns_for(MsgKind::kReadRequest, r.len, cfg_.pmtu);
      if (in < 0 || uint32_t(in) >= span) continue;
      if (!r.atomic) {
        if (!read_responses(p.bth.psn, p.va, p.rkey, p.dma_len, r.msn))
          fail(p.bth.psn, NakCode::kRemoteAccessError, AsyncEvent::kQpAccessErr);
      } else {
        Packet a = response(kAtomicAcknowledge, r.psn);
        a.syndrome = syndrome_ack(kCreditsInvalid);
        a.msn = r.msn;
        a.atomic_orig = r.orig;
        env_->send(a);
      }
      return;
    }
    ++stats_->dropped;  // older than what we remember: the requester will time out
    return;
  }
  // SEND / WRITE already executed: acknowledge it at its own PSN. (Not at
  // epsn_ - 1: that may be a READ's PSN, which an ACK must not name.)
  if (p.bth.ack_req) ack(p.bth.psn);
}

}  // namespace uroce::transport
