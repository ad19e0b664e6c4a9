#include "net/raw_engine.h"

#include <algorithm>
#include <cstring>

#include "common/clock.h"
#include "contract/limits.h"
#include "link/xdp_link.h"
#include "net/net_engine.h"
#include "net/net_engine_tuning.h"
#include "net/raw_switch.h"

namespace uroce::core {

namespace {

/// A gather list's bytes, in order, into *out.
void gather(const iovec* loc, size_t nl, std::vector<uint8_t>* out) {
  size_t len = 0;
  for (size_t i = 0; i < nl; ++i) len += loc[i].iov_len;
  out->resize(len);
  size_t at = 0;
  for (size_t i = 0; i < nl; ++i) {
    std::memcpy(out->data() + at, loc[i].iov_base, loc[i].iov_len);
    at += loc[i].iov_len;
  }
}

}  // namespace

RawEngine::RawEngine(QpOwner& owner, uint32_t ifindex, uint32_t qpn, uint32_t max_frame, link::XdpPort* wire,
                     RawCounters* counters)
    : owner_(owner), ifindex_(ifindex), qpn_(qpn), max_frame_(max_frame), wire_(wire), counters_(counters) {}

RawEngine::~RawEngine() {
  Guard<SpinLock> g(mu_);
  if (wire_) wire_->flush();
}

void RawEngine::post(const SendWqe& w) {
  iovec loc[kLimits.max_sge];
  size_t nl = 0;
  uint64_t len = 0;
  WcStatus st = owner_.check_local(w, loc, &nl, &len);
  if (st == WcStatus::kSuccess && (len > max_frame_ || len < kEthHeaderBytes)) st = WcStatus::kLocLenErr;
  const bool signaled = w.flags & send_flags::kSignaled;
  Guard<SpinLock> g(mu_);
  if (errored_) {  // ERR: nothing new starts (IBA 10.8.3.3)
    complete(w.wr_id, signaled, WcStatus::kWrFlushErr, 0);
    return;
  }
  if (rate_kbps_ == 0 && pending_.empty() && !draining_) {
    bool sent = true;
    if (st == WcStatus::kSuccess) {
      if (nl == 1) {
        sent = send(std::span<const uint8_t>(static_cast<const uint8_t*>(loc[0].iov_base), loc[0].iov_len));
      } else {
        gather(loc, nl, &frame_);
        sent = send(frame_);
      }
    }
    if (sent) {
      complete(w.wr_id, signaled, st, uint32_t(len));
      return;
    }
  }
  // It waits (paced, or the port's send ring is full): the frame is copied
  // now (the WQE's buffers are the application's until it completes, but
  // its inline data is not).
  Pending p{w.wr_id, signaled, st, {}};
  if (st == WcStatus::kSuccess) gather(loc, nl, &p.frame);
  pending_.push_back(std::move(p));
  const uint64_t next = pump_locked(fast_now_ns());
  if (next != UINT64_MAX) NetEngine::get().kick(next);
}

uint64_t RawEngine::pump(uint64_t now) {
  if (!waiting_.load(std::memory_order_acquire)) return UINT64_MAX;
  Guard<SpinLock> g(mu_);
  return pump_locked(now);
}

uint64_t RawEngine::pump_locked(uint64_t now) {
  const uint64_t next = release(now);
  waiting_.store(!pending_.empty(), std::memory_order_release);
  return next;
}

uint64_t RawEngine::release(uint64_t now) {
  if (draining_) return UINT64_MAX;  // SQD: what has not begun waits
  while (!pending_.empty()) {
    Pending& p = pending_.front();
    if (p.status == WcStatus::kSuccess) {
      if (next_ns_ > now) return next_ns_;
      if (!send(p.frame)) return now + tuning::kRawKickNs;  // the ring is full: again soon
      // After an idle time the clock restarts at `now`, less what a burst may
      // send back to back.
      next_ns_ = std::max(next_ns_, now - std::min(now, gap_ns(burst_bytes_))) + gap_ns(p.frame.size());
    }
    const WcStatus st = p.status;
    complete(p.wr_id, p.signaled, st, uint32_t(p.frame.size()));
    pending_.pop_front();
    if (st != WcStatus::kSuccess) flush_locked();  // the QP is in ERR: the rest is flushed
  }
  return UINT64_MAX;
}

uint64_t RawEngine::gap_ns(size_t bytes) const {
  // bits / (kbit/s) = ms / 1000: bytes * 8 * 10^6 / kbps ns.
  return rate_kbps_ ? uint64_t(bytes) * 8'000'000u / rate_kbps_ : 0;
}

void RawEngine::set_rate(uint32_t kbps, uint32_t max_burst_bytes) {
  uint64_t next;
  {
    Guard<SpinLock> g(mu_);
    rate_kbps_ = kbps;
    burst_bytes_ = max_burst_bytes;
    next = pump_locked(fast_now_ns());  // an unpaced QP sends what waited at once
  }
  if (next != UINT64_MAX) NetEngine::get().kick(next);
}

void RawEngine::complete(uint64_t wr_id, bool signaled, WcStatus st, uint32_t len) {
  owner_.completed(wr_id, WcOpcode::kSend, st, st == WcStatus::kSuccess ? len : 0, signaled, &unsignaled_);
  if (st != WcStatus::kSuccess && st != WcStatus::kWrFlushErr) {
    errored_ = true;
    owner_.failed(QpFailure{false, AsyncEvent::kQpFatal, "raw frame not sent"});
  }
}

void RawEngine::flush() {
  Guard<SpinLock> g(mu_);
  flush_locked();
}

void RawEngine::flush_locked() {
  errored_ = true;
  while (!pending_.empty()) {
    const Pending& p = pending_.front();
    complete(p.wr_id, p.signaled, WcStatus::kWrFlushErr, 0);
    pending_.pop_front();
  }
  waiting_.store(false, std::memory_order_release);
}

void RawEngine::reset() {
  Guard<SpinLock> g(mu_);
  pending_.clear();
  waiting_.store(false, std::memory_order_release);
  unsignaled_ = 0;
  errored_ = false;
  next_ns_ = 0;
}

void RawEngine::drain(bool on) {
  uint64_t next = UINT64_MAX;
  {
    Guard<SpinLock> g(mu_);
    draining_ = on;
    if (!on) next = pump_locked(fast_now_ns());
  }
  // Every frame that began has left (frames leave whole, at once).
  if (on) owner_.drained();
  if (next != UINT64_MAX) NetEngine::get().kick(next);
}

bool RawEngine::send(std::span<const uint8_t> frame) {
  if (!wire_) {
    count_sent(frame.size());
    RawSwitch::get().sent(ifindex_, qpn_, frame);
    return true;
  }
  // The kick (a system call) goes with every kRawKickBatch frames, and with
  // a frame that follows the previous one by more than kRawKickSparseNs (a
  // ping-pong's); the others wait at most for the application's next empty
  // poll or the engine thread's kRawKickNs.
  Status st = wire_->send_frame(frame);
  if (st.err() == EAGAIN) {  // every send frame in flight: send what waits, once more
    wire_->flush();
    queued_ = 0;
    st = wire_->send_frame(frame);
  }
  // Still full (the kernel took none back): the frame waits in the send
  // queue, as on a NIC whose queue is backed up; never dropped.
  if (st.err() == EAGAIN) {
    if (counters_) ++counters_->send_waits;
    return false;
  }
  if (st.is_ok()) count_sent(frame.size());
  RawSwitch::get().sent(ifindex_, qpn_, frame);
  if (!st.is_ok()) return true;
  const uint64_t now = fast_now_ns();
  const bool sparse = now - last_sent_ns_ > tuning::kRawKickSparseNs;
  last_sent_ns_ = now;
  if (++queued_ >= tuning::kRawKickBatch || sparse) {
    wire_->flush();
    queued_ = 0;
  } else {
    NetEngine::get().raw_frame_queued();
  }
  return true;
}

void RawEngine::count_sent(size_t bytes) {
  if (!counters_) return;
  ++counters_->sent;  // one writer: this engine, under mu_
  counters_->sent_bytes += bytes;
}

}  // namespace uroce::core
