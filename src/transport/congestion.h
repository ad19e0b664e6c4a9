// How much an RC requester may have in flight: a congestion window in
// packets, driven by what the network tells a sender without help from its
// switches (as NVIDIA's ZTR-RTTCC and Google's Swift do):
// - the round-trip delay: below a target the window grows by `ai` packets
//   per round trip (additive increase); above it, once per round trip, it
//   shrinks in proportion to the excess (multiplicative decrease, at most
//   by `max_md`) -- Swift, Kumar et al., SIGCOMM'20. The delay a round
//   judges by is the least sample of that round: a queue at a bottleneck
//   holds for the whole round, the scheduling delays of a busy host come
//   and go, and a controller that cut at every late ACK would starve on a
//   loaded machine;
// - a loss (a PSN-sequence NAK or an early resend): halve, once per round;
// - a retransmission timeout: back to one packet, then slow start;
// - a CNP (RoCE v2's congestion notification, IBA Annex A17.9.1): DCQCN's
//   cut, window * (1 - alpha / 2), alpha the moving share of rounds that saw
//   one (Zhu et al., SIGCOMM'15), once per round.
// A new flow starts with `initial` packets and doubles per round trip (slow
// start) until the delay passes the target or a loss or CNP comes. After a
// cut the window climbs back towards where it was cut by half the distance
// per round trip (BIC's binary search; DCQCN's fast recovery), since one
// late round on a busy host is no proof the path got slower; past that
// point it grows by `ai` per round trip, and faster the longer no cut
// comes (DCQCN's hyper increase): `ai` more per round trip for each round
// beyond `hyper_after`, up to `max_gain` times `ai`.
//
// The delay rule applies on a path that has shown it drops: for
// `delay_armed_ns` after a loss, a timeout or a CNP. A path that never
// dropped is left to the loss rule alone: a host's own receive queue (the
// peer process slower than its sender, on loopback or an idle veth) also
// delays ACKs, holds megabytes without loss, and cutting the window for it
// costs throughput and buys nothing (bench/RESULTS.md, issue 31).
//
// The target delay is the least round trip seen plus a queueing allowance:
// `target_queue_ns`, or a quarter of that least round trip if larger (a long
// path tolerates more), plus Swift's flow scaling: a flow whose window is
// small (one of many sharing a port) allows the queue a little more, up to
// `flow_scale_ns` at a window of one packet, so that many flows at their
// floor still meet their target instead of cutting each other forever.
//
// Pure: time comes in as arguments; no I/O. Used by RcRequester.
#pragma once

#include <cstdint>

#include "common/counted.h"

namespace uroce::transport {

struct CongestionConfig {
  /// The largest window (packets): the requester's cap (RequesterConfig::window).
  double max_window = 1024;
  /// The least window (packets).
  double min_window = 1;
  /// A new flow's window (packets), from which it doubles per round trip.
  double initial = 16;
  /// Queueing delay allowed above the least round trip.
  uint64_t target_queue_ns = 300'000;
  /// The most flow scaling adds to the target (a window of one packet).
  uint64_t flow_scale_ns = 150'000;
  /// Additive increase, packets per round trip.
  double ai = 1.0;
  /// Rounds without a cut after which the increase speeds up, and how far.
  uint32_t hyper_after = 5;
  double max_gain = 16;
  /// Decrease per unit of relative excess delay (Swift's beta).
  double beta = 0.8;
  /// The largest decrease one round makes (by delay or loss): the window
  /// keeps at least (1 - max_md) of itself.
  double max_md = 0.5;
  /// DCQCN's g: the weight of the newest round in alpha.
  double cnp_g = 1.0 / 16;
  /// How long after a loss, a timeout or a CNP the delay rule applies
  /// (0: always).
  uint64_t delay_armed_ns = 10'000'000'000;
  /// Off: the window stays at max_window (the requester's old fixed window).
  bool enabled = true;
};

/// Counts (they add up across QPs).
struct CongestionStats {
  uint64_t rtt_samples = 0;
  uint64_t delay_cuts = 0;  // rounds whose delay was above the target
  uint64_t loss_cuts = 0;
  uint64_t timeouts = 0;
  uint64_t cnps = 0;      // CNPs received
  uint64_t cnp_cuts = 0;  // of those: acted on (one per round)
};

/// What the controller holds now (per QP; they do not add up).
struct CongestionGauges {
  uint64_t window = 0;  // packets
  uint64_t srtt_ns = 0, min_rtt_ns = 0, target_ns = 0;
};

class CongestionControl {
 public:
  explicit CongestionControl(const CongestionConfig& cfg = {});

  /// An acknowledgement: `acked` packets newly acknowledged, `rtt_ns` the
  /// round trip of a packet it covers (0: none measured).
  void on_ack(uint64_t now_ns, uint32_t acked, uint64_t rtt_ns);
  /// A lost packet was found (a PSN-sequence NAK, an early resend).
  void on_loss(uint64_t now_ns);
  /// The retransmission timer expired.
  void on_timeout(uint64_t now_ns);
  /// A CNP for this flow.
  void on_cnp(uint64_t now_ns);

  /// Packets that may be unacknowledged, at least one.
  uint32_t window() const;
  /// The window with its fraction (packets).
  double window_exact() const { return cwnd_; }
  /// The target delay now (0: no round trip measured yet).
  uint64_t target_ns() const;
  uint64_t srtt_ns() const { return srtt_ns_; }
  uint64_t min_rtt_ns() const { return min_rtt_ns_; }
  bool slow_start() const { return slow_start_; }
  /// Whether the delay rule applies now (see CongestionConfig::delay_armed_ns).
  bool delay_armed(uint64_t now_ns) const {
    return cfg_.delay_armed_ns == 0 || (armed_ && now_ns - armed_at_ < cfg_.delay_armed_ns);
  }
  double alpha() const { return alpha_; }
  const CongestionStats& stats() const { return stats_.get(); }
  /// Counts and gauges from now on into `s` and `g` (contract/counters.h).
  void count_into(CongestionStats* s, CongestionGauges* g) {
    stats_.use(s);
    gauges_ = g;
    publish();
  }
  /// How many times the window changed by a decision (a cut, a timeout):
  /// a trace of rate changes reads it.
  uint64_t changes() const {
    const CongestionStats& s = stats_.get();
    return s.delay_cuts + s.loss_cuts + s.timeouts + s.cnp_cuts;
  }

 private:
  /// How long a round lasts: the smoothed round trip (at least 1 us).
  uint64_t round_ns() const;
  /// Ends the round if it is over: judges its least delay.
  void end_round(uint64_t now_ns);
  /// A multiplicative cut by `factor` (once per round: see can_cut).
  void cut(double factor, uint64_t now_ns);
  bool can_cut(uint64_t now_ns) const;
  void clamp();
  /// The path dropped or marked: the delay rule applies for a while.
  void arm(uint64_t now_ns) {
    armed_ = true;
    armed_at_ = now_ns;
  }
  /// Writes the gauges, if someone reads them.
  void publish();

  CongestionConfig cfg_;
  double cwnd_;
  bool slow_start_ = true;
  uint64_t srtt_ns_ = 0, min_rtt_ns_ = 0;
  double ssthresh_ = 1e18;  // slow start ends here (set by a timeout)
  bool round_started_ = false;
  uint64_t round_start_ = 0;
  uint64_t round_min_ = 0;  // least sample this round (0: none yet)
  uint64_t last_cut_ = 0;   // when the window was last cut (0: never)
  bool cut_ever_ = false;
  bool cut_this_round_ = false;
  bool armed_ = false;  // a loss, timeout or CNP was seen (at armed_at_)
  uint64_t armed_at_ = 0;
  double w_max_ = 0;           // the window before the last cut (fast recovery climbs to it)
  uint32_t rounds_clean_ = 0;  // rounds ended since the last cut
  double alpha_ = 1.0;         // DCQCN starts pessimistic
  bool cnp_this_round_ = false;
  Counted<CongestionStats> stats_;
  CongestionGauges* gauges_ = nullptr;
};

/// The receiving side of DCQCN (its notification point): counts the
/// requests that arrived marked Congestion Experienced and says which of
/// them earn their requester a CNP: at most one per `interval_ns` per QP
/// (DCQCN's NP sends one per 50 us per flow; the requester acts on at most
/// one per round trip anyway).
struct NotifyStats {
  uint64_t ce_marked = 0;  // requests that arrived marked CE
  uint64_t cnps_sent = 0;
};

class CnpPacer {
 public:
  static constexpr uint64_t kDefaultIntervalNs = 50'000;
  explicit CnpPacer(uint64_t interval_ns = kDefaultIntervalNs) : interval_ns_(interval_ns) {}
  /// A request arrived marked CE: whether to send a CNP now.
  bool on_marked(uint64_t now_ns) {
    ++stats_->ce_marked;
    if (sent_ && now_ns - last_ns_ < interval_ns_) return false;
    sent_ = true;
    last_ns_ = now_ns;
    ++stats_->cnps_sent;
    return true;
  }
  const NotifyStats& stats() const { return stats_.get(); }
  void count_into(NotifyStats* s) { stats_.use(s); }

 private:
  uint64_t interval_ns_;
  bool sent_ = false;
  uint64_t last_ns_ = 0;
  Counted<NotifyStats> stats_;
};

}  // namespace uroce::transport
