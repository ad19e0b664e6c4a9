#include "transport/congestion.h"

#include <algorithm>
#include <cmath>

namespace uroce::transport {

CongestionControl::CongestionControl(const CongestionConfig& cfg)
    : cfg_(cfg), cwnd_(cfg.enabled ? std::min(cfg.initial, cfg.max_window) : cfg.max_window) {
  slow_start_ = cfg_.enabled;
  clamp();
}

uint32_t CongestionControl::window() const { return std::max<uint32_t>(1, uint32_t(cwnd_)); }

uint64_t CongestionControl::round_ns() const { return std::max<uint64_t>(srtt_ns_, 1'000); }

uint64_t CongestionControl::target_ns() const {
  if (!min_rtt_ns_) return 0;
  const uint64_t queue = std::max(cfg_.target_queue_ns, min_rtt_ns_ / 4);
  // Swift's flow scaling: the full allowance at one packet, none at the
  // largest window, in 1/sqrt(window) between.
  const double lo = 1.0 / std::sqrt(std::max(cfg_.max_window, 1.0));
  double share = lo < 1.0 ? (1.0 / std::sqrt(std::max(cwnd_, 1.0)) - lo) / (1.0 - lo) : 0.0;
  share = std::clamp(share, 0.0, 1.0);
  return min_rtt_ns_ + queue + uint64_t(share * double(cfg_.flow_scale_ns));
}

void CongestionControl::clamp() {
  cwnd_ = std::clamp(cwnd_, std::max(cfg_.min_window, 1e-3), std::max(cfg_.max_window, cfg_.min_window));
}

bool CongestionControl::can_cut(uint64_t now) const { return !cut_ever_ || now - last_cut_ >= round_ns(); }

void CongestionControl::cut(double factor, uint64_t now) {
  w_max_ = cwnd_;
  cut_this_round_ = true;
  cwnd_ *= std::clamp(factor, 1.0 - cfg_.max_md, 1.0);
  if (slow_start_) ssthresh_ = cwnd_;
  slow_start_ = false;
  last_cut_ = now;
  cut_ever_ = true;
  clamp();
}

void CongestionControl::end_round(uint64_t now) {
  if (!round_started_) {
    round_started_ = true;
    round_start_ = now;
    return;
  }
  if (now - round_start_ < round_ns()) return;
  if (round_min_) {
    const uint64_t target = target_ns();
    if (round_min_ > target && can_cut(now) && delay_armed(now)) {
      // Swift: in proportion to the excess, at most max_md.
      const double excess = double(round_min_ - target) / double(round_min_);
      ++stats_->delay_cuts;
      cut(1.0 - cfg_.beta * excess, now);
    }
  }
  // DCQCN's alpha decays while no CNP comes.
  if (!cnp_this_round_) alpha_ *= 1.0 - cfg_.cnp_g;
  cnp_this_round_ = false;
  rounds_clean_ = cut_this_round_ ? 0 : rounds_clean_ + 1;
  cut_this_round_ = false;
  round_start_ = now;
  round_min_ = 0;
}

void CongestionControl::publish() {
  if (!gauges_) return;
  gauges_->window = window();
  gauges_->srtt_ns = srtt_ns_;
  gauges_->min_rtt_ns = min_rtt_ns_;
  gauges_->target_ns = target_ns();
}

void CongestionControl::on_ack(uint64_t now, uint32_t acked, uint64_t rtt) {
  if (rtt) {
    ++stats_->rtt_samples;
    srtt_ns_ = srtt_ns_ ? (7 * srtt_ns_ + rtt) / 8 : rtt;
    min_rtt_ns_ = min_rtt_ns_ ? std::min(min_rtt_ns_, rtt) : rtt;
    round_min_ = round_min_ ? std::min(round_min_, rtt) : rtt;
  }
  if (cfg_.enabled) {
    end_round(now);
    if (slow_start_) {
      cwnd_ += acked;
      if (cwnd_ >= ssthresh_) slow_start_ = false;
    } else if (cwnd_ < w_max_) {
      // Fast recovery: half the way back to the window before the cut per
      // round trip (a round trip acknowledges about a window), at least ai.
      cwnd_ += std::max(cfg_.ai, (w_max_ - cwnd_) / 2) * double(acked) / std::max(cwnd_, 1.0);
    } else {
      // Additive increase, faster after hyper_after rounds without a cut.
      double gain = 1.0;
      if (rounds_clean_ > cfg_.hyper_after)
        gain = std::min(double(rounds_clean_ - cfg_.hyper_after), std::max(cfg_.max_gain, 1.0));
      cwnd_ += cfg_.ai * gain * double(acked) / std::max(cwnd_, 1.0);
    }
    clamp();
  }
  publish();
}

void CongestionControl::on_loss(uint64_t now) {
  arm(now);
  if (!cfg_.enabled || !can_cut(now)) return;
  ++stats_->loss_cuts;
  cut(1.0 - cfg_.max_md, now);
  publish();
}

void CongestionControl::on_timeout(uint64_t now) {
  ++stats_->timeouts;
  arm(now);
  if (!cfg_.enabled) return;
  ssthresh_ = std::max(cwnd_ / 2, cfg_.min_window);
  w_max_ = ssthresh_;
  rounds_clean_ = 0;
  cut_this_round_ = true;
  cwnd_ = cfg_.min_window;
  slow_start_ = true;
  last_cut_ = now;
  cut_ever_ = true;
  clamp();
  publish();
}

void CongestionControl::on_cnp(uint64_t now) {
  ++stats_->cnps;
  arm(now);
  if (!cfg_.enabled) return;
  if (!cnp_this_round_) {
    cnp_this_round_ = true;
    alpha_ = (1.0 - cfg_.cnp_g) * alpha_ + cfg_.cnp_g;
  }
  if (!can_cut(now)) return;
  ++stats_->cnp_cuts;
  cut(1.0 - alpha_ / 2, now);
  publish();
}

}  // namespace uroce::transport
