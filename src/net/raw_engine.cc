#include "net/raw_engine.h"

#include <cstring>

#include "contract/limits.h"
#include "link/xdp_link.h"
#include "net/net_engine.h"
#include "net/net_engine_tuning.h"
#include "net/raw_switch.h"

namespace uroce::core {

RawEngine::RawEngine(QpOwner& owner, uint32_t ifindex, uint32_t qpn, uint32_t max_frame, link::XdpPort* wire)
    : owner_(owner), ifindex_(ifindex), qpn_(qpn), max_frame_(max_frame), wire_(wire) {}

void RawEngine::post(const SendWqe& w) {
  iovec loc[kLimits.max_sge];
  size_t nl = 0;
  uint64_t len = 0;
  WcStatus st = owner_.check_local(w, loc, &nl, &len);
  if (st == WcStatus::kSuccess && (len > max_frame_ || len < kEthHeaderBytes)) st = WcStatus::kLocLenErr;
  if (st == WcStatus::kSuccess) {
    std::span<const uint8_t> frame;
    if (nl == 1) {
      frame = std::span<const uint8_t>(static_cast<const uint8_t*>(loc[0].iov_base), loc[0].iov_len);
    } else {
      frame_.resize(len);
      size_t at = 0;
      for (size_t i = 0; i < nl; ++i) {
        std::memcpy(frame_.data() + at, loc[i].iov_base, loc[i].iov_len);
        at += loc[i].iov_len;
      }
      frame = std::span<const uint8_t>(frame_.data(), frame_.size());
    }
    RawSwitch::get().sent(ifindex_, qpn_, frame);
    if (wire_) {
      // The kick (a system call) goes with every kRawKickBatch frames; the
      // ones before wait at most for the application's next empty poll or
      // the engine thread's kRawKickNs.
      Status st = wire_->send_frame(frame);
      if (st.err() == EAGAIN) {  // every send frame in flight: send what waits, once more
        wire_->flush();
        queued_ = 0;
        st = wire_->send_frame(frame);
      }
      if (st.is_ok() && ++queued_ >= tuning::kRawKickBatch) {
        wire_->flush();
        queued_ = 0;
      } else if (st.is_ok()) {
        NetEngine::get().raw_frame_queued();
      }
    }
  }
  owner_.completed(w.wr_id, WcOpcode::kSend, st, st == WcStatus::kSuccess ? uint32_t(len) : 0,
                   w.flags & send_flags::kSignaled, &unsignaled_);
  if (st != WcStatus::kSuccess) owner_.failed(QpFailure{false, AsyncEvent::kQpFatal, "raw frame not sent"});
}

void RawEngine::drain(bool on) {
  if (on) owner_.drained();  // every WQE completes as it is posted
}

}  // namespace uroce::core
