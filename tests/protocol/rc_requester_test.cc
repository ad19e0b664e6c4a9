// The RC requester (src/transport/rc_requester) against scripted responses:
// what it sends, and how each kind of answer — or silence — completes its
// WQEs (IBA Vol. 1 9.7.6: retry_cnt, rnr_retry, NAK codes, flushes).
#include "transport/rc_requester.h"

#include <gtest/gtest.h>

#include <vector>

namespace uroce::transport {
namespace {

using namespace uroce::wire;
using transport::WcStatus;

struct Env : RequesterEnv {
  struct Sent {
    uint8_t op;
    uint32_t psn;
    bool ack_req;
    uint32_t len;
    uint8_t service = 0;
    uint32_t xrc_srqn = 0;
  };
  std::vector<Sent> sent;
  std::vector<std::pair<uint64_t, WcStatus>> done;
  int errors = 0;
  size_t done_at_error = 0;  // completions made before the QP went to ERR
  void send(Packet& p) override {
    sent.push_back({uint8_t(p.bth.opcode & 0x1f), p.bth.psn, p.bth.ack_req, uint32_t(p.payload.size()),
                    uint8_t(p.bth.opcode >> 5), p.xrc_srqn});
  }
  void complete(const SqWqe& w, WcStatus st, uint32_t) override { done.emplace_back(w.wr_id, st); }
  void qp_error() override {
    ++errors;
    done_at_error = done.size();
  }
};

class RcRequesterTest : public ::testing::Test {
 protected:
  Env env;
  RequesterConfig cfg = [] {
    RequesterConfig c;
    c.pmtu = 256;
    c.sq_psn = 50;
    c.timeout_ns = 1000;
    c.retry_cnt = 3;
    c.rnr_retry = 2;
    return c;
  }();
  RcRequester r{cfg, &env};
  std::vector<uint8_t> buf = std::vector<uint8_t>(1024, 7);

  SqWqe send_wqe(uint64_t id, uint32_t len) {
    SqWqe w;
    w.wr_id = id;
    w.kind = MsgKind::kSend;
    w.len = len;
    if (len) w.local.push_back(iovec{buf.data(), len});
    return w;
  }
  Packet resp(uint32_t psn, uint8_t syndrome) {
    Packet p;
    p.bth.opcode = opcode(Service::kRc, kAcknowledge);
    p.bth.psn = psn;
    p.syndrome = syndrome;
    return p;
  }
};

TEST_F(RcRequesterTest, SegmentsAsksForAnAckAtTheEndAndCompletesOnIt) {
  r.post(send_wqe(1, 600), 0);
  ASSERT_EQ(env.sent.size(), 3u);
  EXPECT_EQ(env.sent[0].op, kSendFirst);
  EXPECT_EQ(env.sent[1].op, kSendMiddle);
  EXPECT_EQ(env.sent[2].op, kSendLast);
  EXPECT_EQ(env.sent[2].psn, 52u);
  EXPECT_FALSE(env.sent[0].ack_req);
  EXPECT_TRUE(env.sent[2].ack_req);
  EXPECT_EQ(env.sent[2].len, 88u);
  r.on_response(resp(51, syndrome_ack(kCreditsInvalid)), 10);  // partial: not complete yet
  EXPECT_TRUE(env.done.empty());
  r.on_response(resp(52, syndrome_ack(kCreditsInvalid)), 20);
  ASSERT_EQ(env.done.size(), 1u);
  EXPECT_EQ(env.done[0], std::make_pair(uint64_t(1), WcStatus::kSuccess));
  EXPECT_EQ(r.next_deadline(), UINT64_MAX);
}

TEST_F(RcRequesterTest, SilenceExhaustsRetryCntThenFlushes) {
  r.post(send_wqe(1, 10), 0);
  r.post(send_wqe(2, 10), 0);
  uint64_t now = 0;
  for (int i = 0; i < 10 && env.done.empty(); ++i) {
    now = r.next_deadline();
    r.on_timer(now);
  }
  ASSERT_EQ(env.done.size(), 2u);
  EXPECT_EQ(env.done[0], std::make_pair(uint64_t(1), WcStatus::kRetryExcErr));
  EXPECT_EQ(env.done[1], std::make_pair(uint64_t(2), WcStatus::kWrFlushErr));
  EXPECT_EQ(r.stats().timeouts, 4u);  // retry_cnt 3: three retries, then the error
  EXPECT_EQ(env.errors, 1);
  // ERR before the error completion: whoever polls it and queries finds ERR.
  EXPECT_EQ(env.done_at_error, 0u);
  r.post(send_wqe(3, 10), now);  // a QP in ERR flushes what is posted
  EXPECT_EQ(env.done.back(), std::make_pair(uint64_t(3), WcStatus::kWrFlushErr));
}

TEST_F(RcRequesterTest, TheCongestionWindowStartsSmallOpensWithAcksAndHalvesAtALoss) {
  // Expect: a 200-packet message goes out 16 packets first (the initial
  // window), each ACK times the packet that asked for it, and opens the
  // window by what it acknowledges (slow start).
  RequesterConfig c = cfg;
  c.timeout_ns = 1'000'000;
  RcRequester q{c, &env};
  std::vector<uint8_t> big(256 * 200, 1);
  SqWqe w = send_wqe(1, 0);
  w.len = uint32_t(big.size());
  w.local.push_back(iovec{big.data(), big.size()});
  q.post(std::move(w), 0);
  ASSERT_EQ(env.sent.size(), 16u);
  EXPECT_TRUE(env.sent.back().ack_req);  // the packet that fills the window asks
  EXPECT_TRUE(q.window_full());          // nothing to do but wait for ACKs
  // The ACK arrived at 30 us and was read at 45 us (the process was busy):
  // the round trip ends at its arrival.
  Packet ack = resp(50 + 15, syndrome_ack(kCreditsInvalid));
  ack.rx_ns = 30'000;
  q.on_response(ack, 45'000);
  EXPECT_EQ(q.congestion().min_rtt_ns(), 30'000u);
  EXPECT_EQ(env.sent.size(), 16u + 32u);  // 32 may be out now
  EXPECT_TRUE(q.window_full());
  // A PSN-sequence NAK at the first of the new ones: half the window.
  const uint32_t before = q.congestion().window();
  env.sent.clear();
  q.on_response(resp(50 + 16, syndrome_nak(NakCode::kPsnSequenceError)), 60'000);
  EXPECT_EQ(q.congestion().window(), before / 2);
  EXPECT_EQ(q.congestion().stats().loss_cuts, 1u);
  ASSERT_FALSE(env.sent.empty());
  EXPECT_EQ(env.sent.front().psn, 50u + 16);
  EXPECT_EQ(env.sent.size(), before / 2);  // go-back-N within the smaller window
  EXPECT_EQ(q.stats().resent_packets, before / 2);
  EXPECT_EQ(q.stats().resent_bytes, 256u * (before / 2));
  // Everything acknowledged: the window is not what holds anything back.
  q.on_response(resp(50 + 199, syndrome_ack(kCreditsInvalid)), 70'000);
  EXPECT_FALSE(q.window_full());
}

TEST_F(RcRequesterTest, ReadsAreAskedWithinTheWindowAndATimeoutAsksOnlyTheOldestAgain) {
  // Expect: READs of 8 PMTUs each (8 PSNs of response) with a window of 32
  // PSNs and 16 READs allowed out: 4 are asked at once, not 10 (a READ's
  // responses count against the window as a write's packets do).
  RequesterConfig c = cfg;
  c.window = 32;
  c.cc.initial = 32;  // the whole window at once
  c.max_rd_atomic = 16;
  RcRequester rr{c, &env};
  std::vector<uint8_t> dst(2048 * 10);
  for (uint64_t id = 1; id <= 10; ++id) {
    SqWqe w;
    w.wr_id = id;
    w.kind = MsgKind::kReadRequest;
    w.len = 2048;
    w.remote_va = 0x1000 * id;
    w.rkey = 9;
    w.local.push_back(iovec{dst.data() + (id - 1) * 2048, 2048});
    rr.post(std::move(w), 0);
  }
  ASSERT_EQ(env.sent.size(), 4u);
  for (const Env::Sent& s : env.sent) EXPECT_EQ(s.op, kReadRequest);
  EXPECT_TRUE(rr.window_full());
  // Expect: silence, the timer: the oldest READ only, twice (before, all
  // four went again, twice: each one executed again by the responder).
  env.sent.clear();
  rr.on_timer(rr.next_deadline());
  ASSERT_EQ(env.sent.size(), 2u);
  EXPECT_EQ(env.sent[0].psn, 50u);
  EXPECT_EQ(env.sent[1].psn, 50u);
}

TEST_F(RcRequesterTest, RnrNaksWaitThenExhaustRnrRetry) {
  r.post(send_wqe(1, 10), 0);
  const size_t first = env.sent.size();
  r.on_response(resp(50, syndrome_rnr_nak(1)), 5);  // timer code 1: 10 us
  EXPECT_EQ(env.sent.size(), first) << "nothing resent before the RNR timer";
  EXPECT_EQ(r.next_deadline(), 5u + 10000);
  r.on_timer(5 + 10000);
  EXPECT_EQ(env.sent.size(), first + 1);
  EXPECT_EQ(env.sent.back().psn, 50u);
  r.on_response(resp(50, syndrome_rnr_nak(1)), 20000);
  r.on_timer(30000);
  r.on_response(resp(50, syndrome_rnr_nak(1)), 40000);  // third RNR: rnr_retry 2 is spent
  ASSERT_EQ(env.done.size(), 1u);
  EXPECT_EQ(env.done[0].second, WcStatus::kRnrRetryExcErr);
}

TEST_F(RcRequesterTest, SequenceNakGoesBackToItsPsn) {
  r.post(send_wqe(1, 600), 0);  // PSNs 50, 51, 52
  r.post(send_wqe(2, 10), 0);   // PSN 53
  env.sent.clear();
  r.on_response(resp(51, syndrome_nak(NakCode::kPsnSequenceError)), 10);
  ASSERT_EQ(env.sent.size(), 3u);  // 51, 52 of the first message, then 53
  EXPECT_EQ(env.sent[0].psn, 51u);
  EXPECT_EQ(env.sent[0].op, kSendMiddle);
  EXPECT_EQ(env.sent[2].psn, 53u);
  EXPECT_TRUE(env.done.empty());
}

TEST_F(RcRequesterTest, ARepeatedSequenceNakIsIgnoredWithinTheGuardAndLookedAtAgainLater) {
  // The responder repeats its NAK while packets keep arriving past the gap;
  // repeats sent before the resent packet reached it come in right after the
  // go-back. No round trip measured yet: the guard is an eighth of the
  // timeout (timeout_ns = 1000: 125 ns).
  r.post(send_wqe(1, 600), 0);  // PSNs 50, 51, 52
  r.post(send_wqe(2, 10), 0);   // PSN 53
  env.sent.clear();
  r.on_response(resp(51, syndrome_nak(NakCode::kPsnSequenceError)), 10);
  ASSERT_EQ(env.sent.size(), 3u);  // 51, 52, 53 again
  r.on_response(resp(51, syndrome_nak(NakCode::kPsnSequenceError)), 100);
  EXPECT_EQ(env.sent.size(), 3u) << "a repeat within the guard resends nothing now";
  EXPECT_EQ(r.stats().seq_naks_ignored, 1u);
  // ...but is looked at again two guards later: no progress past 51, so the
  // resend was lost too and 51 goes again (long before the timer).
  EXPECT_EQ(r.next_deadline(), 350u);
  r.on_timer(349);
  EXPECT_EQ(env.sent.size(), 3u);
  r.on_timer(350);
  ASSERT_EQ(env.sent.size(), 6u);
  EXPECT_EQ(env.sent[3].psn, 51u);
  EXPECT_EQ(r.stats().seq_naks_rechecked, 1u);
  EXPECT_EQ(r.stats().timeouts, 0u);
  // A repeat after the guard is acted on at once; one for another PSN too.
  r.on_response(resp(51, syndrome_nak(NakCode::kPsnSequenceError)), 500);
  ASSERT_EQ(env.sent.size(), 9u);
  r.on_response(resp(52, syndrome_nak(NakCode::kPsnSequenceError)), 510);
  ASSERT_EQ(env.sent.size(), 11u);
  EXPECT_EQ(env.sent[9].psn, 52u);
  EXPECT_EQ(r.stats().seq_naks, 4u);  // received (the second look is not one)
  EXPECT_TRUE(env.done.empty());
}

TEST_F(RcRequesterTest, AnIgnoredRepeatIsForgottenOnceTheResendGetsThrough) {
  r.post(send_wqe(1, 600), 0);  // PSNs 50, 51, 52
  env.sent.clear();
  r.on_response(resp(51, syndrome_nak(NakCode::kPsnSequenceError)), 10);
  ASSERT_EQ(env.sent.size(), 2u);
  r.on_response(resp(51, syndrome_nak(NakCode::kPsnSequenceError)), 100);  // stale
  r.on_response(resp(52, syndrome_ack(kCreditsInvalid)), 200);             // the resend arrived
  ASSERT_EQ(env.done.size(), 1u);
  r.on_timer(400);
  EXPECT_EQ(env.sent.size(), 2u);
  EXPECT_EQ(r.stats().seq_naks_rechecked, 0u);
}

TEST_F(RcRequesterTest, ATailLossIsProbedAfterFourRoundTripsThenDoublingNotAtTheTimeout) {
  RequesterConfig c = cfg;
  c.timeout_ns = 10'000'000;
  RcRequester q{c, &env};
  q.post(send_wqe(1, 10), 0);  // PSN 50, timed
  q.on_response(resp(50, syndrome_ack(kCreditsInvalid)), 1'000);
  ASSERT_EQ(env.done.size(), 1u);  // round trip: 1 us
  env.sent.clear();
  q.post(send_wqe(2, 10), 2'000);  // PSN 51: lost (or its ACK)
  ASSERT_EQ(env.sent.size(), 1u);
  // Four round trips are less than the floor: 200 us after the send.
  EXPECT_EQ(q.next_deadline(), 202'000u);
  q.on_timer(201'999);
  EXPECT_EQ(env.sent.size(), 1u);
  q.on_timer(202'000);
  ASSERT_EQ(env.sent.size(), 2u);
  EXPECT_EQ(env.sent[1].psn, 51u);
  EXPECT_TRUE(env.sent[1].ack_req);
  EXPECT_EQ(q.stats().probes, 1u);
  EXPECT_EQ(q.stats().timeouts, 0u);
  // Again at twice that, and twice that again (a quiet spell may be the
  // peer descheduled for milliseconds, not a loss), while before half the
  // timer: 400, 800, 1,600 and 3,200 us after the send.
  size_t sent = 2;
  for (uint64_t at : {402'000u, 802'000u, 1'602'000u, 3'202'000u}) {
    EXPECT_EQ(q.next_deadline(), at);
    q.on_timer(at);
    ASSERT_EQ(env.sent.size(), ++sent);
    EXPECT_EQ(env.sent.back().psn, 51u);
  }
  EXPECT_EQ(q.stats().probes, 5u);
  EXPECT_EQ(q.next_deadline(), 2'000u + 10'000'000u);
  q.on_timer(5'000'000);
  EXPECT_EQ(env.sent.size(), sent);
  q.on_response(resp(51, syndrome_ack(kCreditsInvalid)), 5'000'100);
  ASSERT_EQ(env.done.size(), 2u);
  EXPECT_EQ(env.done[1].second, WcStatus::kSuccess);
  EXPECT_EQ(q.next_deadline(), UINT64_MAX);
}

TEST_F(RcRequesterTest, ErrorNaksCompleteWithTheirStatus) {
  struct Case {
    NakCode code;
    WcStatus want;
  } cases[] = {{NakCode::kRemoteAccessError, WcStatus::kRemAccessErr},
               {NakCode::kInvalidRequest, WcStatus::kRemInvReqErr},
               {NakCode::kRemoteOperationalError, WcStatus::kRemOpErr}};
  for (const Case& c : cases) {
    Env e;
    RcRequester q(cfg, &e);
    q.post(send_wqe(1, 10), 0);
    q.post(send_wqe(2, 10), 0);
    q.on_response(resp(51, syndrome_nak(c.code)), 10);  // 50 acked implicitly, 51 failed
    ASSERT_EQ(e.done.size(), 2u);
    EXPECT_EQ(e.done[0], std::make_pair(uint64_t(1), WcStatus::kSuccess));
    EXPECT_EQ(e.done[1], std::make_pair(uint64_t(2), c.want));
    EXPECT_EQ(e.errors, 1);
    EXPECT_EQ(e.done_at_error, 1u);  // after 1's success, before 2's error
  }
}

TEST_F(RcRequesterTest, StaleAndForeignResponsesAreIgnored) {
  r.post(send_wqe(1, 10), 0);
  r.on_response(resp(49, syndrome_ack(kCreditsInvalid)), 1);  // before anything outstanding
  r.on_response(resp(60, syndrome_ack(kCreditsInvalid)), 1);  // beyond what was sent
  EXPECT_TRUE(env.done.empty());
  EXPECT_EQ(r.stats().dropped, 2u);
}

TEST_F(RcRequesterTest, AsUcItSendsWithoutTheABitAndCompletesOnSending) {
  RequesterConfig c = cfg;
  c.unreliable = true;
  Env e;
  RcRequester uc(c, &e);
  uc.post(send_wqe(1, 600), 0);
  ASSERT_EQ(e.sent.size(), 3u);
  for (const auto& s : e.sent) EXPECT_FALSE(s.ack_req);
  ASSERT_EQ(e.done.size(), 1u);
  EXPECT_EQ(e.done[0], std::make_pair(uint64_t(1), WcStatus::kSuccess));
  EXPECT_EQ(uc.next_deadline(), UINT64_MAX);  // nothing to retransmit, ever
  SqWqe rd;
  rd.wr_id = 2;
  rd.kind = MsgKind::kReadRequest;
  rd.len = 8;
  uc.post(std::move(rd), 0);
  EXPECT_EQ(e.done.back(), std::make_pair(uint64_t(2), WcStatus::kLocQpOpErr));
}

TEST(RcRequesterXrc, AnInitiatorSendsXrcOpcodesNamingItsSrqAndCompletesOnTheXrcAck) {
  // IBA 9.8: an XRC initiator is RC's requester with the XRC opcodes, and
  // every request packet carries the XRCETH of its WQE (the target's SRQ).
  Env env;
  RequesterConfig c;
  c.pmtu = 256;
  c.sq_psn = 10;
  c.xrc = true;
  RcRequester r{c, &env};
  std::vector<uint8_t> buf(600, 3);
  auto post = [&](uint64_t id, MsgKind kind, uint32_t len, uint32_t srqn) {
    SqWqe w;
    w.wr_id = id;
    w.kind = kind;
    w.len = len;
    w.local.push_back(iovec{buf.data(), len});
    w.xrc_srqn = srqn;
    r.post(std::move(w), 0);
  };
  post(1, MsgKind::kSend, 600, 0x4321);
  post(2, MsgKind::kReadRequest, 8, 0x55);
  ASSERT_EQ(env.sent.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(env.sent[i].service, uint8_t(Service::kXrc)) << i;
    EXPECT_EQ(env.sent[i].xrc_srqn, 0x4321u) << i;
  }
  EXPECT_EQ(env.sent[3].op, kReadRequest);
  EXPECT_EQ(env.sent[3].service, uint8_t(Service::kXrc));
  EXPECT_EQ(env.sent[3].xrc_srqn, 0x55u);
  Packet a;
  a.bth.opcode = opcode(Service::kXrc, kAcknowledge);
  a.bth.psn = 12;
  a.syndrome = syndrome_ack(kCreditsInvalid);
  r.on_response(a, 0);
  ASSERT_EQ(env.done.size(), 1u);
  EXPECT_EQ(env.done[0], std::make_pair(uint64_t(1), WcStatus::kSuccess));
}

TEST_F(RcRequesterTest, ASelectivePeerGetsOnlyTheNakedPacketAgainThenTwiceAsManyForABurst) {
  // Expect: a NAK resends the one packet it names (asking for an ACK), not
  // everything after it; a NAK for the packet right after that one (a burst
  // was lost) resends two, then four...; ACKs complete as usual.
  RequesterConfig c = cfg;
  c.timeout_ns = 1'000'000;
  RcRequester q{c, &env};
  q.set_selective(true);
  for (uint64_t i = 0; i < 12; ++i) q.post(send_wqe(i, 10), 0);  // PSNs 50..61
  ASSERT_EQ(env.sent.size(), 12u);
  env.sent.clear();
  q.on_response(resp(53, syndrome_nak(NakCode::kPsnSequenceError)), 100);
  ASSERT_EQ(env.sent.size(), 1u);
  EXPECT_EQ(env.sent[0].psn, 53u);
  EXPECT_TRUE(env.sent[0].ack_req);
  EXPECT_EQ(env.done.size(), 3u) << "the NAK acknowledges 50..52";
  EXPECT_EQ(q.stats().holes_resent, 1u);
  // That filled the gap; 54 was lost too: 54 and 55 go.
  env.sent.clear();
  q.on_response(resp(54, syndrome_nak(NakCode::kPsnSequenceError)), 200);
  ASSERT_EQ(env.sent.size(), 2u);
  EXPECT_EQ(env.sent[0].psn, 54u);
  EXPECT_EQ(env.sent[1].psn, 55u);
  // And a NAK at 56, right after those: four.
  env.sent.clear();
  q.on_response(resp(56, syndrome_nak(NakCode::kPsnSequenceError)), 300);
  ASSERT_EQ(env.sent.size(), 4u);
  EXPECT_EQ(env.sent[0].psn, 56u);
  // A gap elsewhere starts again from one.
  env.sent.clear();
  q.on_response(resp(59, syndrome_nak(NakCode::kPsnSequenceError)), 400);
  ASSERT_EQ(env.sent.size(), 1u);
  EXPECT_EQ(env.sent[0].psn, 59u);
  q.on_response(resp(61, syndrome_ack(kCreditsInvalid)), 500);
  EXPECT_EQ(env.done.size(), 12u);
  for (uint64_t i = 0; i < 12; ++i) EXPECT_EQ(env.done[i], std::make_pair(i, WcStatus::kSuccess));
}

TEST_F(RcRequesterTest, WithAReorderingWaitANakIsActedOnOnlyIfItsGapOutlivesTheWait) {
  // Expect: a NAK from a selective peer waits reorder_ns; an ACK past its
  // PSN meanwhile (the packet was only overtaken) settles it: nothing goes
  // again and the window is not cut; a gap still open when the wait ends
  // is a loss (resend, cut); a repeat of the NAK while waiting changes
  // nothing.
  RequesterConfig c = cfg;
  c.timeout_ns = 1'000'000;  // the wait is at most 125 us of it
  c.reorder_ns = 50'000;
  RcRequester q{c, &env};
  q.set_selective(true);
  for (uint64_t i = 0; i < 12; ++i) q.post(send_wqe(i, 10), 0);  // PSNs 50..61
  env.sent.clear();
  q.on_response(resp(53, syndrome_nak(NakCode::kPsnSequenceError)), 100);
  EXPECT_TRUE(env.sent.empty()) << "nothing resent before the wait ends";
  EXPECT_EQ(env.done.size(), 3u) << "the NAK still acknowledges 50..52";
  EXPECT_EQ(q.next_deadline(), 100u + 50'000u);
  q.on_response(resp(53, syndrome_nak(NakCode::kPsnSequenceError)), 200);
  EXPECT_EQ(q.stats().seq_naks_ignored, 1u);
  q.on_response(resp(55, syndrome_ack(kCreditsInvalid)), 300);  // 53 came after all
  EXPECT_EQ(q.stats().naks_reordered, 1u);
  q.on_timer(100 + 50'000);
  EXPECT_TRUE(env.sent.empty());
  EXPECT_EQ(q.congestion().stats().loss_cuts, 0u) << "no cut for a packet only overtaken";
  // A gap at 57 that stays open: 57 goes again when the wait ends.
  q.on_response(resp(57, syndrome_nak(NakCode::kPsnSequenceError)), 60'000);
  EXPECT_TRUE(env.sent.empty());
  q.on_timer(60'000 + 49'999);
  EXPECT_TRUE(env.sent.empty());
  q.on_timer(60'000 + 50'000);
  ASSERT_EQ(env.sent.size(), 1u);
  EXPECT_EQ(env.sent[0].psn, 57u);
  EXPECT_EQ(q.stats().holes_resent, 1u);
  EXPECT_EQ(q.stats().naks_reordered, 1u);
  EXPECT_EQ(q.congestion().stats().loss_cuts, 1u);
}

TEST_F(RcRequesterTest, ASelectivePeerStillGetsEverythingAgainAfterATimeout) {
  RcRequester q{cfg, &env};
  q.set_selective(true);
  for (uint64_t i = 0; i < 4; ++i) q.post(send_wqe(i, 10), 0);
  env.sent.clear();
  q.on_timer(q.next_deadline());
  ASSERT_FALSE(env.sent.empty());
  for (const auto& s : env.sent) EXPECT_EQ(s.psn, 50u) << "back to the oldest (the window is one packet now)";
  EXPECT_EQ(q.stats().holes_resent, 0u);
}

}  // namespace
}  // namespace uroce::transport
