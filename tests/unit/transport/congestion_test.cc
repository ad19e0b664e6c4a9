// The congestion window as a pure state machine: crafted sequences of
// round trips, losses, timeouts and CNPs (transport/congestion.h).
#include "transport/congestion.h"

#include <gtest/gtest.h>

#include <cmath>

namespace uroce::transport {
namespace {

constexpr uint64_t kUs = 1000;

CongestionConfig config() {
  CongestionConfig c;
  c.max_window = 1024;
  c.initial = 16;
  c.target_queue_ns = 100 * kUs;
  c.flow_scale_ns = 0;   // the tests that want flow scaling say so
  c.delay_armed_ns = 0;  // the delay rule always (DelayRuleWaitsForALoss tests the default)
  return c;
}

/// Feeds one round trip's worth of ACKs: the window's packets acknowledged
/// in `acks` ACKs, each measuring `rtt_ns`, spread over one round trip
/// starting at `*now` (advanced by it).
void round_trip(CongestionControl& cc, uint64_t* now, uint64_t rtt_ns, int acks = 4) {
  const uint32_t per = std::max<uint32_t>(1, cc.window() / uint32_t(acks));
  for (int i = 0; i < acks; ++i) {
    *now += rtt_ns / uint64_t(acks);
    cc.on_ack(*now, per, rtt_ns);
  }
}

TEST(Congestion, SlowStartDoublesPerRoundTripUntilTheDelayPassesTheTarget) {
  CongestionControl cc(config());
  EXPECT_EQ(cc.window(), 16u);
  EXPECT_TRUE(cc.slow_start());
  uint64_t now = 1;
  round_trip(cc, &now, 20 * kUs);
  round_trip(cc, &now, 20 * kUs);
  EXPECT_EQ(cc.window(), 64u);           // 16 -> 32 -> 64
  EXPECT_EQ(cc.target_ns(), 120 * kUs);  // least round trip + the allowance
  // Expect: a round whose least delay is 3x the target ends slow start with
  // the largest cut (beta * excess = 0.8 * 2/3 > max_md).
  const uint32_t before = cc.window();
  round_trip(cc, &now, 360 * kUs);
  round_trip(cc, &now, 360 * kUs);
  EXPECT_FALSE(cc.slow_start());
  EXPECT_GE(cc.stats().delay_cuts, 1u);
  EXPECT_LT(cc.window(), before);
}

TEST(Congestion, AdditiveIncreaseIsOnePacketPerRoundTripBelowTheTarget) {
  CongestionConfig c = config();
  c.initial = 10;
  c.max_gain = 1;  // no hyper increase
  CongestionControl cc(c);
  uint64_t now = 1;
  cc.on_loss(now);  // out of slow start: 10 -> 5
  EXPECT_EQ(cc.window(), 5u);
  // Fast recovery first: back to the 10 it was cut at.
  for (int i = 0; i < 10 && cc.window() < 10; ++i) {
    now += 20 * kUs;
    for (uint32_t k = 0; k < cc.window(); ++k) cc.on_ack(now, 1, 20 * kUs);
  }
  const double w0 = cc.window_exact();
  for (int i = 0; i < 10; ++i) {
    now += 20 * kUs;
    // A round trip's ACKs: the window's packets, one ACK each.
    for (uint32_t k = 0; k < cc.window(); ++k) cc.on_ack(now, 1, 20 * kUs);
  }
  // About 10 packets more after 10 round trips (1/cwnd per packet).
  EXPECT_NEAR(cc.window_exact(), w0 + 10, 1.5);
  EXPECT_EQ(cc.stats().delay_cuts, 0u);
}

TEST(Congestion, AfterACutTheWindowClimbsBackHalfTheDistancePerRoundTrip) {
  CongestionConfig c = config();
  c.initial = 128;
  CongestionControl cc(c);
  uint64_t now = 1;
  round_trip(cc, &now, 20 * kUs);  // 256
  cc.on_loss(now);                 // 128; it was 256
  EXPECT_EQ(cc.window(), 128u);
  // Each round trip: about half the distance to 256 (128 -> ~172 -> ...;
  // the step per ACK is the distance left over twice the window).
  now += 20 * kUs;
  for (uint32_t k = 0; k < 128; ++k) cc.on_ack(now, 1, 20 * kUs);
  EXPECT_GT(cc.window_exact(), 160.0);
  EXPECT_LT(cc.window_exact(), 200.0);
  for (int r = 0; r < 5; ++r) {
    now += 20 * kUs;
    const uint32_t w = cc.window();
    for (uint32_t k = 0; k < w; ++k) cc.on_ack(now, 1, 20 * kUs);
  }
  EXPECT_GE(cc.window(), 240u);
  EXPECT_LE(cc.window(), 260u);  // then additive again, not a second slow start
}

TEST(Congestion, LongWithoutACutTheIncreaseSpeedsUp) {
  CongestionConfig c = config();
  c.initial = 20;
  c.hyper_after = 5;
  c.max_gain = 8;
  CongestionControl cc(c);
  uint64_t now = 1;
  cc.on_loss(now);  // 10, fast recovery to 20 first
  auto one_round = [&] {
    now += 20 * kUs;
    const uint32_t w = cc.window();
    for (uint32_t k = 0; k < w; ++k) cc.on_ack(now, 1, 20 * kUs);
  };
  for (int r = 0; r < 10; ++r) one_round();
  // Late rounds grow by up to 8 packets each, the first ones by about one.
  const double before = cc.window_exact();
  for (int r = 0; r < 10; ++r) one_round();
  EXPECT_GT(cc.window_exact() - before, 40.0);
  EXPECT_LT(cc.window_exact() - before, 10 * 8 + 2.0);
}

TEST(Congestion, TheDelayRuleWaitsForALossAndLastsTenSecondsAfterIt) {
  CongestionConfig c = config();
  c.delay_armed_ns = CongestionConfig{}.delay_armed_ns;
  c.initial = 64;
  CongestionControl cc(c);
  uint64_t now = 1;
  round_trip(cc, &now, 20 * kUs);  // least round trip 20 us
  // Round trips of 2 ms on a path that never dropped (a slow receiving
  // process with a deep socket queue): no cut.
  for (int i = 0; i < 20; ++i) round_trip(cc, &now, 2'000 * kUs);
  EXPECT_EQ(cc.stats().delay_cuts, 0u);
  EXPECT_FALSE(cc.delay_armed(now));
  // A loss: the same delays now cut.
  cc.on_loss(now);
  EXPECT_TRUE(cc.delay_armed(now));
  for (int i = 0; i < 5; ++i) round_trip(cc, &now, 2'000 * kUs);
  EXPECT_GT(cc.stats().delay_cuts, 0u);
  // Ten seconds after the last loss, no more.
  now += 10'000'000 * kUs;
  EXPECT_FALSE(cc.delay_armed(now));
  const uint64_t cuts = cc.stats().delay_cuts;
  for (int i = 0; i < 5; ++i) round_trip(cc, &now, 2'000 * kUs);
  EXPECT_EQ(cc.stats().delay_cuts, cuts);
}

TEST(Congestion, TheCutIsProportionalToTheExcessAndOncePerRoundTrip) {
  CongestionControl cc(config());
  uint64_t now = 1;
  round_trip(cc, &now, 20 * kUs);  // min rtt 20 us: target 120 us
  cc.on_loss(now);                 // leave slow start
  const double w = cc.window_exact();
  // Expect: delay 150 us, 30 us over a 120 us target: the cut is
  // beta * 30/150 = 0.16, once, whatever the number of late ACKs.
  now += 10 * cc.srtt_ns();
  cc.on_ack(now, 0, 150 * kUs);  // ends the round of the 20 us samples
  for (int i = 0; i < 8; ++i) cc.on_ack(now += 1, 0, 150 * kUs);
  now += 10 * cc.srtt_ns();
  cc.on_ack(now, 0, 150 * kUs);  // ends the round of the 150 us samples: judged
  EXPECT_EQ(cc.stats().delay_cuts, 1u);
  EXPECT_NEAR(cc.window_exact(), w * (1 - 0.8 * 30.0 / 150.0), 0.01);
}

TEST(Congestion, ARoundIsJudgedByItsLeastDelaySoASchedulingSpikeDoesNotCut) {
  CongestionControl cc(config());
  uint64_t now = 1;
  round_trip(cc, &now, 20 * kUs);
  cc.on_loss(now);
  now += 1'000 * kUs;
  const uint32_t w = cc.window();
  // One ACK 2 ms late (the receiver was descheduled), the others on time.
  for (int r = 0; r < 5; ++r) {
    cc.on_ack(now += 5 * kUs, 1, 2'000 * kUs);
    for (int i = 0; i < 3; ++i) cc.on_ack(now += 5 * kUs, 1, 25 * kUs);
    now += cc.srtt_ns();
  }
  EXPECT_EQ(cc.stats().delay_cuts, 0u);
  EXPECT_GE(cc.window(), w);
}

TEST(Congestion, ALossHalvesOncePerRoundTrip) {
  CongestionControl cc(config());
  uint64_t now = 1;
  round_trip(cc, &now, 40 * kUs);  // 32
  cc.on_loss(now);
  EXPECT_EQ(cc.window(), 16u);
  cc.on_loss(now + 1);  // the same round: the same loss event
  EXPECT_EQ(cc.window(), 16u);
  EXPECT_EQ(cc.stats().loss_cuts, 1u);
  cc.on_loss(now + cc.srtt_ns() + 1);
  EXPECT_EQ(cc.window(), 8u);
}

TEST(Congestion, ATimeoutRestartsFromOnePacketAndSlowStartsToHalfTheOldWindow) {
  CongestionControl cc(config());
  uint64_t now = 1;
  round_trip(cc, &now, 20 * kUs);
  round_trip(cc, &now, 20 * kUs);  // 64
  cc.on_timeout(now);
  EXPECT_EQ(cc.window(), 1u);
  EXPECT_TRUE(cc.slow_start());
  for (int i = 0; i < 10; ++i) round_trip(cc, &now, 20 * kUs, 1);
  EXPECT_FALSE(cc.slow_start());
  EXPECT_LT(cc.window(), 64u);  // 32, then one packet per round trip
  EXPECT_GE(cc.window(), 32u);
}

TEST(Congestion, CnpsCutByAlphaOverTwoAndAlphaDecaysWithoutThem) {
  CongestionControl cc(config());
  uint64_t now = 1;
  round_trip(cc, &now, 20 * kUs);  // 32
  const double a = cc.alpha();
  const double w = cc.window_exact();
  cc.on_cnp(now);
  const double a1 = (1 - 1.0 / 16) * a + 1.0 / 16;
  EXPECT_NEAR(cc.window_exact(), w * (1 - a1 / 2), 1e-9);
  cc.on_cnp(now + 1);  // the same round: counted, not acted on
  EXPECT_EQ(cc.stats().cnps, 2u);
  EXPECT_EQ(cc.stats().cnp_cuts, 1u);
  // Rounds without CNPs: alpha falls.
  for (int i = 0; i < 20; ++i) round_trip(cc, &now, 20 * kUs);
  EXPECT_LT(cc.alpha(), a1 / 2);
}

TEST(Congestion, TheWindowStaysWithinItsBoundsWhateverComes) {
  CongestionConfig c = config();
  c.max_window = 64;
  CongestionControl cc(c);
  uint64_t now = 1;
  for (int i = 0; i < 50; ++i) round_trip(cc, &now, 10 * kUs);
  EXPECT_EQ(cc.window(), 64u);
  for (int i = 0; i < 200; ++i) {
    cc.on_cnp(now);
    cc.on_loss(now);
    cc.on_timeout(now);
    now += 1'000 * kUs;
  }
  EXPECT_EQ(cc.window(), 1u);  // never zero: the flow always moves
  EXPECT_GT(cc.window_exact(), 0.0);
}

TEST(Congestion, FlowScalingRaisesTheTargetOfSmallWindows) {
  CongestionConfig c = config();
  c.flow_scale_ns = 200 * kUs;
  c.initial = 1;
  CongestionControl small(c);
  uint64_t now = 1;
  small.on_ack(now += 10 * kUs, 0, 20 * kUs);
  // min rtt 20 + allowance 100 + the whole scaling at a window of one.
  EXPECT_EQ(small.target_ns(), 320 * kUs);
  c.initial = 1024;
  CongestionControl big(c);
  big.on_ack(now += 10 * kUs, 0, 20 * kUs);
  EXPECT_EQ(big.target_ns(), 120 * kUs);
}

TEST(Congestion, OffKeepsTheFixedWindow) {
  CongestionConfig c = config();
  c.enabled = false;
  c.initial = c.max_window;
  CongestionControl cc(c);
  uint64_t now = 1;
  cc.on_loss(now);
  cc.on_timeout(now);
  cc.on_cnp(now);
  round_trip(cc, &now, 5'000 * kUs);
  EXPECT_EQ(cc.window(), 1024u);
  EXPECT_GT(cc.srtt_ns(), 0u);  // still measured (probes and NAK guards use it)
}

TEST(CnpPacer, OneCnpPerIntervalHoweverManyMarks) {
  // Expect: marks 10 us apart for 200 us earn a CNP at 0, 50, 100, 150 and
  // 200 us (one per 50 us); every mark is counted.
  CnpPacer np(50'000);
  NotifyStats s;
  np.count_into(&s);
  int sent = 0;
  for (uint64_t t = 1'000'000; t <= 1'200'000; t += 10'000) sent += np.on_marked(t);
  EXPECT_EQ(sent, 5);
  EXPECT_EQ(s.ce_marked, 21u);
  EXPECT_EQ(s.cnps_sent, 5u);
}

}  // namespace
}  // namespace uroce::transport
