#include "transport/rc_requester.h"

#include <algorithm>
#include <cstring>

#include "common/iov.h"
#include "transport/psn.h"
#include "transport/timers.h"

namespace uroce::transport {

using namespace uroce::wire;

namespace {

bool is_read(MsgKind k) { return k == MsgKind::kReadRequest; }
bool is_atomic(MsgKind k) { return k == MsgKind::kCompareSwap || k == MsgKind::kFetchAdd; }
/// Sent packets (or, for a READ, requested PSNs) that make the WQE complete.
uint32_t total_of(MsgKind k, uint32_t npsn, uint32_t len, uint32_t pmtu) {
  return is_read(k) ? npsn : packets_for(k, len, pmtu);
}

}  // namespace

void RcRequester::post(SqWqe&& w, uint64_t now) {
  if (failed_) {
    env_->complete(w, WcStatus::kWrFlushErr, 0);
    return;
  }
  if (cfg_.unreliable && (is_read(w.kind) || is_atomic(w.kind))) {
    // UC has no READ or atomics (IBA Table 38); the verbs layer refuses them first.
    env_->complete(w, WcStatus::kLocQpOpErr, 0);
    return;
  }
  if (is_local(w.kind)) {
    // Done when every WQE before it is: a send queue completes in order.
    if (q_.empty()) {
      env_->complete(w, WcStatus::kSuccess, 0);
      return;
    }
    Entry& e = q_.emplace_back();
    e.w = std::move(w);
    e.first_psn = next_psn_;
    e.started = true;  // nothing to send; npsn 0
    return;
  }
  Entry& e = q_.emplace_back();
  e.w = std::move(w);
  if (is_atomic(e.w.kind)) e.w.len = 8;
  e.first_psn = next_psn_;
  e.npsn = psns_for(e.w.kind, e.w.len, cfg_.pmtu);
  next_psn_ = psn_add(next_psn_, e.npsn);
  pump(now);
}

void RcRequester::send_packet(Entry& e, uint32_t i, bool ask_ack) {
  const SqWqe& w = e.w;
  const PacketSpan s = packet_of(w.kind, w.len, cfg_.pmtu, i);
  Packet p;
  p.bth.opcode = opcode(service(), s.op);
  p.bth.dest_qp = cfg_.dest_qp;
  p.xrc_srqn = w.xrc_srqn;
  p.bth.psn = psn_add(e.first_psn, i);
  // An ACK every ack_every packets, and at least four per window: when the
  // window is small (it shrinks at each loss) and the one packet asking at
  // its edge, or that ACK, is lost, nothing else would reopen it before the
  // timer (~a fifth of the windows at 10 % loss each way, measured).
  const uint32_t every = std::max<uint32_t>(1, std::min(cfg_.ack_every, cwnd() / 4));
  p.bth.ack_req = !cfg_.unreliable && (s.last || ask_ack || ++since_ack_req_ >= every);
  if (p.bth.ack_req) since_ack_req_ = 0;
  // The round trip: timed from each first transmission that asks for an
  // ACK to the ACK that covers it, never over a retransmission.
  const bool resent = psn_diff(p.bth.psn, sent_hi_) < 0;
  if (!resent) {
    sent_hi_ = psn_add(p.bth.psn, 1);
    if (p.bth.ack_req) timed_.emplace_back() = Timed{p.bth.psn, now_ns_};
  }
  p.bth.solicited = s.last && w.solicited;
  p.va = w.remote_va;
  p.rkey = w.rkey;
  p.dma_len = w.len;
  p.imm = w.imm;
  p.inv_rkey = w.inv_rkey;
  if (is_atomic(w.kind)) {
    p.swap_add = w.kind == MsgKind::kCompareSwap ? w.swap : w.compare_add;
    p.compare = w.compare_add;
    p.bth.ack_req = true;
  }
  if (s.len) {
    // Bytes within one gather entry (the usual case) go straight from there
    // into the datagram (the link copies them while this call runs).
    if (!w.owned.empty()) {
      p.payload = std::span<const uint8_t>(w.owned.data() + s.offset, s.len);  // inline data
    } else if (const uint8_t* at = iov_contiguous({w.local.data(), w.local.size()}, s.offset, s.len)) {
      p.payload = std::span<const uint8_t>(at, s.len);
    } else {
      scratch_.resize(s.len);
      iov_read({w.local.data(), w.local.size()}, s.offset, s.len, scratch_.data());
      p.payload = scratch_;
    }
  }
  ++stats_->packets;
  if (resent) {
    ++stats_->resent_packets;
    stats_->resent_bytes += p.payload.size();
  }
  env_->send(p);
}

void RcRequester::send_read(Entry& e, uint32_t k) {
  // IBA Vol. 1 9.7.4 (requester retry): a READ resumed after a loss asks for the rest only, at its PSN.
  const uint64_t off = uint64_t(k) * cfg_.pmtu;
  Packet p;
  p.bth.opcode = opcode(service(), kReadRequest);  // (never UC: post() refuses READs there)
  p.bth.dest_qp = cfg_.dest_qp;
  p.xrc_srqn = e.w.xrc_srqn;
  p.bth.psn = psn_add(e.first_psn, k);
  p.bth.ack_req = true;
  p.va = e.w.remote_va + off;
  p.rkey = e.w.rkey;
  p.dma_len = uint32_t(e.w.len - std::min<uint64_t>(off, e.w.len));
  ++stats_->packets;
  env_->send(p);
}

uint64_t RcRequester::nak_repeat_guard() const {
  const uint64_t cap = cfg_.timeout_ns ? cfg_.timeout_ns / 8 : kNakRepeatGuardNs;
  const uint64_t srtt = cc_.srtt_ns();
  return srtt ? std::min(cap, std::max(srtt, kMinNakGuardNs)) : cap;
}

void RcRequester::pump(uint64_t now) {
  now_ns_ = now;
  window_full_ = false;
  if (failed_ || rnr_until_) return;
  una_ = window_base();  // never left behind (PSNs wrap at 2^24)
  bool sent = false;
  bool open_reads_before = false;
  for (Entry& e : q_) {
    const uint32_t total = total_of(e.w.kind, e.npsn, e.w.len, cfg_.pmtu);
    const bool rd = is_read(e.w.kind) || is_atomic(e.w.kind);
    if (e.sent < total) {
      if (!e.started) {
        if (draining_) break;  // SQ Drain: nothing new begins
        // 9.7.4.1.4: a fenced WQE waits for earlier READs and atomics.
        if (e.w.fence && open_reads_before) break;
        if (rd && reads_out_ >= std::max<uint32_t>(cfg_.max_rd_atomic, 1)) break;
        if (rd) ++reads_out_;
        e.started = true;
      }
      if (is_read(e.w.kind)) {
        // Its responses count against the window as a write's packets do:
        // a peer that answers slowly is not asked at once for more than the
        // window (a timeout restarts it from one packet; before, every
        // outstanding READ went again, twice, and each is executed again:
        // 128 reads of 64 KiB asked anew of kernel rxe under qemu, which
        // then fell further behind until the requester gave up). The oldest
        // WQE always goes (its responses do not move una_: read_done does).
        if (!cfg_.unreliable && &e != &q_.front() &&
            psn_diff(psn_add(e.first_psn, e.sent), window_base()) >= int32_t(cwnd())) {
          window_full_ = true;
          break;
        }
        send_read(e, e.sent);
        e.sent = total;
        sent = true;
      } else {
        uint32_t i = e.sent;
        for (; i < total; ++i) {
          if (!cfg_.unreliable && psn_diff(psn_add(e.first_psn, i), window_base()) >= int32_t(cwnd())) break;
          // The packet that fills the window asks for an ACK: only ACKs reopen it.
          send_packet(
              e, i,
              !cfg_.unreliable && psn_diff(psn_add(e.first_psn, i + 1), window_base()) >= int32_t(cwnd()));
          sent = true;
        }
        e.sent = i;
        if (i < total) {  // the window is full: ACKs reopen it (on_response pumps)
          window_full_ = true;
          break;
        }
      }
    }
    if (rd) open_reads_before = true;
  }
  if (cfg_.unreliable) {
    // Sent is done: no answer will come.
    while (!q_.empty() && q_.front().started &&
           q_.front().sent == packets_for(q_.front().w.kind, q_.front().w.len, cfg_.pmtu)) {
      env_->complete(q_.front().w, WcStatus::kSuccess, q_.front().w.len);
      q_.pop_front();
    }
    check_drained();
    return;
  }
  if (sent && cfg_.timeout_ns && !deadline_) deadline_ = now + cfg_.timeout_ns;
  check_drained();
}

void RcRequester::drain(bool on, uint64_t now) {
  draining_ = on;
  drained_told_ = false;
  if (on)
    check_drained();
  else
    pump(now);
}

void RcRequester::check_drained() {
  if (!draining_ || drained_told_ || failed_) return;
  if (!q_.empty() && q_.front().started) return;
  drained_told_ = true;
  env_->sq_drained();
}

void RcRequester::place(Entry& e, uint64_t off, std::span<const uint8_t> b) {
  iov_write({e.w.local.data(), e.w.local.size()}, off, b);
}

uint32_t RcRequester::window_base() const {
  // Acknowledged: everything before the oldest WQE, and within it up to una_.
  const uint32_t front = q_.empty() ? next_psn_ : q_.front().first_psn;
  return psn_diff(una_, front) > 0 ? una_ : front;
}

void RcRequester::ack_through(uint32_t psn, uint64_t now, uint64_t arrived) {
  // An ACK in the middle of a long message moves the window on and counts
  // as progress for the retransmission timer.
  bool progress = false;
  uint64_t rtt = 0;
  while (!timed_.empty() && psn_diff(psn, timed_.front().psn) >= 0) {
    rtt = std::max<uint64_t>(arrived > timed_.front().at ? arrived - timed_.front().at : 0, 1);
    timed_.pop_front();
  }
  uint32_t acked = 0;
  if (const uint32_t next = psn_add(psn, 1); psn_diff(next, window_base()) > 0) {
    acked = uint32_t(psn_diff(next, window_base()));
    una_ = next;
    progress = true;
  }
  if (acked || rtt) cc_.on_ack(now, acked, rtt);
  while (!q_.empty()) {
    Entry& e = q_.front();
    if (!e.started) break;
    if (is_read(e.w.kind) || is_atomic(e.w.kind)) {
      if (!e.answered) break;  // those complete with their data
      if (reads_out_) --reads_out_;
    } else if (psn_diff(psn, psn_add(e.first_psn, e.npsn - 1)) < 0) {
      break;
    }
    env_->complete(e.w, WcStatus::kSuccess, e.w.len);
    q_.pop_front();
    progress = true;
  }
  complete_local_front();
  if (progress) {
    probes_ = 0;
    retries_.reset();
    rnr_retries_.reset();
    deadline_ = (cfg_.timeout_ns && !q_.empty() && q_.front().started) ? now + cfg_.timeout_ns : 0;
  }
}

void RcRequester::forget_timings() {
  while (!timed_.empty()) timed_.pop_front();
  probes_ = 0;
}

void RcRequester::go_back(uint32_t psn) {
  forget_timings();  // what they timed may go again (Karn)
  nak_wait_ = 0;     // everything after psn goes again
  bool found = false;
  for (Entry& e : q_) {
    if (!e.started) break;
    const int32_t in = psn_diff(psn, e.first_psn);
    if (!found && in >= 0 && uint32_t(in) < e.npsn) {
      found = true;
      uint32_t k = uint32_t(in);
      if (is_read(e.w.kind)) k = std::max<uint32_t>(k, uint32_t(e.read_done / cfg_.pmtu));
      if (!is_read(e.w.kind) && !is_atomic(e.w.kind))
        k = std::min(k, packets_for(e.w.kind, e.w.len, cfg_.pmtu));
      e.sent = is_atomic(e.w.kind) ? 0 : k;
      stats_->retransmits += 1;
    } else if (found && !e.answered) {
      // Sent again after the one the NAK names (a READ: what is still missing).
      e.sent = is_read(e.w.kind) ? uint32_t(e.read_done / cfg_.pmtu) : 0;
    }
  }
}

void RcRequester::recover(uint32_t psn) {
  if (!selective_) {
    go_back(psn);
    return;
  }
  // The responder kept what followed the gap: the packet the NAK names goes
  // again, alone and asking for an ACK; new packets go on. A NAK right
  // after the packets resent last (they filled a gap, the next one was
  // lost too: a burst lost at a full queue) resends twice as many, so a
  // burst of k losses takes log2(k) round trips, not k. A lost resend is
  // NAKed again; a timeout still goes back for everything. Round trips timed
  // across the gap would measure the recovery, not the path: dropped.
  forget_timings();
  sr_run_ = (sr_next_valid_ && psn == sr_next_) ? std::min(2 * sr_run_, kMaxSrRun) : 1;
  for (uint32_t k = 0; k < sr_run_; ++k)
    if (!resend_one(psn_add(psn, k))) break;
  sr_next_ = psn_add(psn, sr_run_);
  sr_next_valid_ = true;
}

bool RcRequester::resend_one(uint32_t psn) {
  for (Entry& e : q_) {
    if (!e.started) return false;
    const int32_t in = psn_diff(psn, e.first_psn);
    if (in < 0 || uint32_t(in) >= std::max<uint32_t>(e.npsn, 1)) continue;
    if (is_read(e.w.kind) || is_atomic(e.w.kind)) {
      // Asked again once, from what is still missing (the responder sends
      // every response after that PSN again).
      if (in != 0 || e.answered) return false;
      ++stats_->retransmits;
      if (is_read(e.w.kind))
        send_read(e, uint32_t(e.read_done / cfg_.pmtu));
      else
        send_packet(e, 0, true);
      return true;
    }
    if (uint32_t(in) >= e.sent) return false;
    ++stats_->retransmits;
    ++stats_->holes_resent;
    send_packet(e, uint32_t(in), true);
    return true;
  }
  return false;
}

void RcRequester::act_on_nak(uint32_t psn, uint64_t now) {
  nak_seen_ = true;
  nak_psn_ = psn;
  nak_at_ = now;
  nak_recheck_ = 0;  // this recovery replaces a pending second look
  nak_wait_ = 0;
  cc_.on_loss(now);  // send less into the gap next time
  recover(psn);
  pump(now);
}

uint64_t RcRequester::reorder_wait() const {
  if (!selective_ || !cfg_.reorder_ns) return 0;
  return cfg_.timeout_ns ? std::min(cfg_.reorder_ns, cfg_.timeout_ns / 8) : cfg_.reorder_ns;
}

void RcRequester::settle_reordered() {
  if (!nak_wait_) return;
  if (!q_.empty() && psn_diff(window_base(), nak_wait_psn_) <= 0) return;  // still open
  ++stats_->naks_reordered;
  nak_wait_ = 0;
}

void RcRequester::fail_front(WcStatus st) {
  failed_ = true;
  deadline_ = rnr_until_ = nak_recheck_ = nak_wait_ = 0;
  // The QP is in ERR before its error completion can be seen: a program that
  // queries the QP after polling that completion finds ERR (as on hardware).
  env_->qp_error();
  bool first = true;
  while (!q_.empty()) {
    Entry& e = q_.front();
    if (first) e.w.signaled = true;  // errors always complete
    env_->complete(e.w, first ? st : WcStatus::kWrFlushErr, 0);
    first = false;
    q_.pop_front();
  }
}

void RcRequester::flush() {
  failed_ = true;
  while (!q_.empty()) {
    Entry& e = q_.front();
    e.w.signaled = true;  // flushed WQEs always complete (IBA 10.8.3.3)
    env_->complete(e.w, WcStatus::kWrFlushErr, 0);
    q_.pop_front();
  }
  deadline_ = rnr_until_ = nak_recheck_ = nak_wait_ = 0;
}

void RcRequester::on_response(const Packet& p, uint64_t now) {
  now_ns_ = now;
  // Round trips end when the response arrived, if the link knows.
  const uint64_t arrived = p.rx_ns && p.rx_ns <= now ? p.rx_ns : now;
  if (failed_ || q_.empty() || cfg_.unreliable) {
    ++stats_->dropped;
    return;
  }
  const uint8_t op = p.bth.opcode & 0x1f;
  const uint32_t una = q_.front().first_psn;
  // Only PSNs of requests still outstanding mean anything (9.7.6.1.2).
  if (psn_diff(p.bth.psn, una) < 0 || psn_diff(p.bth.psn, next_psn_) >= 0) {
    ++stats_->dropped;
    return;
  }
  if (op == kAcknowledge) {
    switch (ack_type(p.syndrome)) {
      case AckType::kAck:
        ++stats_->acks;
        ack_through(p.bth.psn, now, arrived);
        settle_reordered();
        pump(now);
        return;
      case AckType::kRnrNak:
        ++stats_->rnr_naks;
        ack_through(psn_add(p.bth.psn, -1), now, arrived);
        if (!rnr_retries_.spend(cfg_.rnr_retry)) {
          fail_front(WcStatus::kRnrRetryExcErr);
          return;
        }
        go_back(p.bth.psn);
        rnr_until_ = now + rnr_timer_ns(ack_value(p.syndrome));
        return;
      case AckType::kNak: {
        ack_through(psn_add(p.bth.psn, -1), now, arrived);
        const NakCode c = NakCode(ack_value(p.syndrome));
        if (c == NakCode::kPsnSequenceError) {
          ++stats_->seq_naks;
          // A repeat of the NAK acted on, within a round trip of acting on
          // it, was (most likely) sent before what that resent reached the
          // responder; a later one means the resent packet was lost too.
          if (nak_seen_ && p.bth.psn == nak_psn_ && now - nak_at_ < nak_repeat_guard()) {
            // Unless the resent packets get through (progress past it by
            // then), this NAK is acted on after all, two round trips later
            // (the resend was lost too: far sooner than the timer).
            ++stats_->seq_naks_ignored;
            if (!nak_recheck_) nak_recheck_ = now + 2 * nak_repeat_guard();
            return;
          }
          if (const uint64_t wait = reorder_wait()) {
            // A packet overtaken on the way fills the gap soon: act then
            // if it is still open (on_timer). A repeat meanwhile changes
            // nothing; a NAK further on means the gap waited for filled.
            if (nak_wait_ && p.bth.psn == nak_wait_psn_) {
              ++stats_->seq_naks_ignored;
              return;
            }
            settle_reordered();
            nak_wait_ = now + wait;
            nak_wait_psn_ = p.bth.psn;
            return;
          }
          act_on_nak(p.bth.psn, now);
          return;
        }
        ++stats_->error_naks;
        fail_front(c == NakCode::kRemoteAccessError        ? WcStatus::kRemAccessErr
                   : c == NakCode::kRemoteOperationalError ? WcStatus::kRemOpErr
                                                           : WcStatus::kRemInvReqErr);
        return;
      }
      case AckType::kReserved:
        ++stats_->dropped;
        return;
    }
  }
  // READ responses and atomic ACKs belong to one READ / atomic WQE and imply
  // an ACK of every request before it (9.7.5.1.2 "implied ACK").
  Entry* e = nullptr;
  for (Entry& x : q_) {
    const int32_t in = psn_diff(p.bth.psn, x.first_psn);
    if (in >= 0 && uint32_t(in) < x.npsn) {
      e = &x;
      break;
    }
  }
  const bool atomic_ack = op == kAtomicAcknowledge;
  if (!e || !e->started || e->answered || (atomic_ack ? !is_atomic(e->w.kind) : !is_read(e->w.kind))) {
    ++stats_->dropped;
    return;
  }
  ack_through(psn_add(e->first_psn, -1), now, arrived);
  // Responses come in PSN order: READs and atomics before `e` still missing
  // data lost theirs.
  for (Entry& x : q_) {
    if (&x == e) break;
    if (x.started && !x.answered && (is_read(x.w.kind) || is_atomic(x.w.kind))) reask(x);
  }
  if (atomic_ack) {
    uint64_t orig = p.atomic_orig;
    place(*e, 0, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&orig), 8));
    e->answered = true;
  } else {
    const uint64_t expect = e->read_done;
    const uint64_t at = uint64_t(uint32_t(psn_diff(p.bth.psn, e->first_psn))) * cfg_.pmtu;
    if (at != expect) {
      if (at > expect) reask(*e);  // a response packet went missing: ask again for the rest
      ++stats_->dropped;
      return;
    }
    // Data is placed as it comes, for any READ; completions stay in order.
    place(*e, at, p.payload);
    e->read_done += p.payload.size();
    e->reasked_at = UINT64_MAX;
    if (op == kReadResponseLast || op == kReadResponseOnly) e->answered = true;
    retries_.reset();  // progress
    deadline_ = cfg_.timeout_ns ? now + cfg_.timeout_ns : 0;
  }
  complete_answered(now);
}

void RcRequester::reask(Entry& x) {
  const uint64_t from = is_read(x.w.kind) ? x.read_done : 0;
  if (x.reasked_at == from) return;  // once per loss; the timer covers a lost re-ask
  x.reasked_at = from;
  ++stats_->retransmits;
  if (is_read(x.w.kind))
    send_read(x, uint32_t(from / cfg_.pmtu));
  else
    send_packet(x, 0);
}

void RcRequester::complete_local_front() {
  while (!q_.empty() && is_local(q_.front().w.kind)) {
    env_->complete(q_.front().w, WcStatus::kSuccess, 0);
    q_.pop_front();
  }
}

void RcRequester::complete_answered(uint64_t now) {
  bool done = false;
  while (!q_.empty() && q_.front().answered) {
    Entry& f = q_.front();
    env_->complete(f.w, WcStatus::kSuccess, f.w.len);
    q_.pop_front();
    if (reads_out_) --reads_out_;
    done = true;
  }
  if (!done) return;
  complete_local_front();
  retries_.reset();
  rnr_retries_.reset();
  deadline_ = (cfg_.timeout_ns && !q_.empty() && q_.front().started) ? now + cfg_.timeout_ns : 0;
  pump(now);
}

void RcRequester::on_timer(uint64_t now) {
  now_ns_ = now;
  if (failed_) return;
  if (rnr_until_ && now >= rnr_until_) {
    rnr_until_ = 0;
    deadline_ = cfg_.timeout_ns ? now + cfg_.timeout_ns : 0;
    pump(now);
    return;
  }
  if (nak_wait_ && now >= nak_wait_) {
    settle_reordered();
    if (nak_wait_) {  // the gap outlived the wait: lost
      act_on_nak(nak_wait_psn_, now);
      return;
    }
  }
  if (nak_recheck_ && now >= nak_recheck_) {
    nak_recheck_ = 0;
    if (!q_.empty() && window_base() == nak_psn_) {
      // The NAK repeated while its resend was on the way still stands.
      ++stats_->seq_naks_rechecked;
      nak_at_ = now;
      cc_.on_loss(now);
      recover(nak_psn_);
      pump(now);
      return;
    }
  }
  if (const uint64_t pr = probe_time(); pr && now >= pr) probe();
  if (!deadline_ || now < deadline_ || q_.empty()) return;
  // 9.7.6.1.3: no progress within the local ACK timeout: retry from the oldest.
  ++stats_->timeouts;
  if (!retries_.spend(cfg_.retry_cnt)) {
    fail_front(WcStatus::kRetryExcErr);
    return;
  }
  nak_recheck_ = nak_wait_ = 0;  // everything goes again anyway
  // Retransmit everything outstanding, twice: duplicates cost nothing but
  // bandwidth during recovery (the responder answers each), and on a lossy
  // link a retry that needs one of two copies of the request and of its
  // answer to get through almost never fails, so retry_cnt is spent on real
  // outages, not on unlucky single losses.
  for (Entry& e : q_) e.reasked_at = UINT64_MAX;
  cc_.on_timeout(now);
  for (int copy = 0; copy < 2; ++copy) {
    go_back(q_.front().first_psn);
    pump(now);
  }
  deadline_ = now + cfg_.timeout_ns;
}

uint64_t RcRequester::probe_time() const {
  if (probes_ >= kMaxProbes || rnr_until_ || failed_ || !deadline_ || !cc_.min_rtt_ns() || !cfg_.timeout_ns ||
      q_.empty())
    return 0;
  // From the least round trip seen, or twice the smoothed one if longer
  // (a queue on the path, a busy peer: an ACK is not late for it).
  const uint64_t pto = std::max({4 * cc_.min_rtt_ns(), 2 * cc_.srtt_ns(), kMinProbeNs});
  const uint64_t at = pto << probes_;  // PTO, 2 PTO, 4 PTO... after the last progress
  if (at >= cfg_.timeout_ns / 2) return 0;
  return deadline_ - cfg_.timeout_ns + at;  // deadline_ was armed at the last progress
}

void RcRequester::probe() {
  // A loss at the tail (nothing sent after it, so no NAK) or of the ACK
  // that ends a burst waits for the timer; hardware retransmits earlier
  // than it (adaptive retransmission). At growing intervals in a quiet spell
  // (the peer may merely be descheduled), the newest packet goes again
  // asking for an ACK: the responder then ACKs it (the
  // ACK was lost), takes it (it was lost) or, with an earlier gap, NAKs
  // at once (a resend). The retry count is not touched: only the timer is
  // a timeout.
  ++probes_;
  for (size_t k = q_.size(); k-- > 0;) {
    Entry& e = q_[k];
    if (!e.started || e.sent == 0) continue;
    if (is_read(e.w.kind) || is_atomic(e.w.kind)) return;  // asked again by reask() or the timer
    ++stats_->probes;
    send_packet(e, e.sent - 1, true);
    return;
  }
}

uint64_t RcRequester::next_deadline() const {
  if (rnr_until_) return rnr_until_;
  uint64_t d = deadline_ ? deadline_ : UINT64_MAX;
  if (nak_recheck_) d = std::min(d, nak_recheck_);
  if (nak_wait_) d = std::min(d, nak_wait_);
  if (const uint64_t pr = probe_time()) d = std::min(d, pr);
  return d;
}

}  // namespace uroce::transport
