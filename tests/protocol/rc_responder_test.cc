// The RC responder (src/transport/rc_responder) driven by crafted request
// packets: what it writes, completes and answers for new requests,
// duplicates, gaps, missing receive WQEs and bad requests (IBA Vol. 1 9.7.5).
#include "transport/rc_responder.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "protocol/fake_receives.h"
#include "transport/psn.h"

namespace uroce::transport {
namespace {

using namespace uroce::wire;
using transport::AsyncEvent;
using transport::WcStatus;

constexpr uint32_t kRkey = 0x1000;
constexpr uint64_t kVa = 0x10000;
constexpr uint32_t kPmtu = 256;

/// Memory, receive buffers and the wire of a fake target QP.
class FakeEnv : public FakeReceives {
 public:
  std::vector<uint8_t> mem = std::vector<uint8_t>(4096);
  uint32_t rights =
      transport::access::kRemoteWrite | transport::access::kRemoteRead | transport::access::kRemoteAtomic;
  struct Sent {
    uint8_t op;
    uint32_t psn;
    uint8_t syndrome;
    uint32_t msn;
    uint64_t orig;
    std::vector<uint8_t> payload;
    uint8_t service = 0;
  };
  std::vector<Sent> sent;
  std::vector<AsyncEvent> errors;

  uint8_t* remote_memory(uint32_t rkey, uint64_t va, uint64_t len, uint32_t need) override {
    if (rkey != kRkey || (rights & need) != need || va < kVa || va - kVa + len > mem.size()) return nullptr;
    return mem.data() + (va - kVa);
  }
  uint64_t atomic(uint8_t* at, bool cas, uint64_t cmp_add, uint64_t swap) override {
    uint64_t v;
    memcpy(&v, at, 8);
    uint64_t next = cas ? (v == cmp_add ? swap : v) : v + cmp_add;
    memcpy(at, &next, 8);
    return v;
  }
  void send(Packet& p) override {
    sent.push_back({uint8_t(p.bth.opcode & 0x1f), p.bth.psn, p.syndrome, p.msn, p.atomic_orig,
                    std::vector<uint8_t>(p.payload.begin(), p.payload.end()), uint8_t(p.bth.opcode >> 5)});
  }
  void qp_error(AsyncEvent ev) override { errors.push_back(ev); }
};

class RcResponderTest : public ::testing::Test {
 protected:
  FakeEnv env;
  ResponderConfig cfg{kPmtu, 0x77, 100, 12, 4};
  RcResponder r{cfg, &env};
  std::vector<uint8_t> data = [] {
    std::vector<uint8_t> d(2000);
    for (size_t i = 0; i < d.size(); ++i) d[i] = uint8_t(i * 11 + 5);
    return d;
  }();

  Packet req(Op op, uint32_t psn, size_t off = 0, size_t len = 0, bool ack = false) {
    Packet p;
    p.bth.opcode = opcode(Service::kRc, op);
    p.bth.psn = psn & kPsnMask;
    p.bth.ack_req = ack;
    p.payload = std::span<const uint8_t>(data.data() + off, len);
    return p;
  }
  /// All packets of a message (as the requester's packetizer makes them).
  std::vector<Packet> message(MsgKind k, uint32_t psn, uint32_t len, uint64_t va = kVa) {
    std::vector<Packet> v;
    const uint32_t n = packets_for(k, len, kPmtu);
    for (uint32_t i = 0; i < n; ++i) {
      PacketSpan s = packet_of(k, len, kPmtu, i);
      Packet p = req(s.op, psn + i, s.offset, s.len, s.last);
      p.va = va;
      p.rkey = kRkey;
      p.dma_len = len;
      v.push_back(p);
    }
    return v;
  }
  void deliver(const std::vector<Packet>& v) {
    for (const Packet& p : v) r.on_request(p);
  }
};

TEST_F(RcResponderTest, SendOfSeveralPacketsCompletesOnceAndIsAcked) {
  env.posted.emplace_back(1000);
  deliver(message(MsgKind::kSend, 100, 600));  // 256 + 256 + 88
  ASSERT_EQ(env.done.size(), 1u);
  EXPECT_EQ(env.done[0].st, WcStatus::kSuccess);
  EXPECT_EQ(env.done[0].len, 600u);
  EXPECT_EQ(memcmp(env.done[0].data.data(), data.data(), 600), 0);
  ASSERT_EQ(env.sent.size(), 1u);  // only the LAST asked for an ACK
  EXPECT_EQ(env.sent[0].op, kAcknowledge);
  EXPECT_EQ(env.sent[0].psn, 102u);
  EXPECT_EQ(ack_type(env.sent[0].syndrome), AckType::kAck);
  EXPECT_EQ(env.sent[0].msn, 1u);
  EXPECT_EQ(r.epsn(), 103u);
}

TEST_F(RcResponderTest, NoReceiveMeansRnrNakThenTheRetrySucceeds) {
  auto m = message(MsgKind::kSendImm, 100, 300);
  m.back().imm = 0x01020304;
  deliver(m);
  ASSERT_EQ(env.sent.size(), 1u);
  EXPECT_EQ(ack_type(env.sent[0].syndrome), AckType::kRnrNak);
  EXPECT_EQ(ack_value(env.sent[0].syndrome), 12);  // min_rnr_timer
  EXPECT_EQ(env.sent[0].psn, 100u);
  EXPECT_EQ(r.stats().seq_naks, 0u) << "packets after the RNR are dropped quietly";
  env.posted.emplace_back(512);
  deliver(m);
  ASSERT_EQ(env.done.size(), 1u);
  EXPECT_TRUE(env.done[0].info.has_imm);
  EXPECT_EQ(env.done[0].info.imm, 0x01020304u);
  EXPECT_EQ(env.sent.back().psn, 101u);
}

TEST_F(RcResponderTest, AGapIsNakedOnceAndTheResendIsAccepted) {
  env.posted.emplace_back(100);
  env.posted.emplace_back(100);
  r.on_request(req(kSendOnly, 101, 0, 10, true));  // 100 was lost
  r.on_request(req(kSendOnly, 102, 0, 10, true));
  ASSERT_EQ(env.sent.size(), 1u);
  EXPECT_EQ(env.sent[0].syndrome, syndrome_nak(NakCode::kPsnSequenceError));
  EXPECT_EQ(env.sent[0].psn, 100u);  // the PSN expected
  EXPECT_TRUE(env.done.empty());
  r.on_request(req(kSendOnly, 100, 0, 10, true));
  r.on_request(req(kSendOnly, 101, 20, 10, true));
  EXPECT_EQ(env.done.size(), 2u);
  EXPECT_EQ(r.epsn(), 102u);
}

TEST_F(RcResponderTest, AGapThatStaysOpenIsNakedAgainAfter4And8And16Packets) {
  // The first NAK may be lost: while packets keep coming past the gap, the
  // NAK goes again, ever more rarely.
  env.posted.emplace_back(100);
  for (uint32_t psn = 101; psn <= 121; ++psn) r.on_request(req(kSendOnly, psn, 0, 10, true));  // 100 lost
  ASSERT_EQ(env.sent.size(), 4u);  // at 101, and after 4, 8 and 16 more (105, 109, 117)
  for (const auto& n : env.sent) {
    EXPECT_EQ(n.syndrome, syndrome_nak(NakCode::kPsnSequenceError));
    EXPECT_EQ(n.psn, 100u);
  }
  EXPECT_EQ(r.stats().seq_naks, 4u);
  EXPECT_EQ(r.stats().seq_naks_repeated, 3u);
  EXPECT_EQ(r.stats().dropped, 17u);
  // The gap closes; the next one is NAKed at once again.
  r.on_request(req(kSendOnly, 100, 0, 10, true));
  EXPECT_EQ(r.epsn(), 101u);
  env.sent.clear();
  r.on_request(req(kSendOnly, 102, 0, 10, true));  // 101 lost now
  ASSERT_EQ(env.sent.size(), 1u);
  EXPECT_EQ(env.sent[0].psn, 101u);
}

TEST_F(RcResponderTest, AResendThatStillMissesTheGapIsNakedAtOnce) {
  env.posted.emplace_back(100);
  r.on_request(req(kSendOnly, 101, 0, 10, true));  // 100 lost: NAK
  r.on_request(req(kSendOnly, 102, 0, 10, true));  // quietly dropped
  ASSERT_EQ(env.sent.size(), 1u);
  // The requester went back; its resend of 100 was lost too: 101 again.
  r.on_request(req(kSendOnly, 101, 0, 10, true));
  ASSERT_EQ(env.sent.size(), 2u);
  EXPECT_EQ(env.sent[1].syndrome, syndrome_nak(NakCode::kPsnSequenceError));
  EXPECT_EQ(env.sent[1].psn, 100u);
  r.on_request(req(kSendOnly, 102, 0, 10, true));  // the rest of that resend: no more NAKs
  EXPECT_EQ(env.sent.size(), 2u);
  EXPECT_EQ(r.stats().seq_naks_repeated, 1u);
}

TEST_F(RcResponderTest, DuplicatesAreAckedNotExecutedAgain) {
  env.posted.emplace_back(100);
  env.posted.emplace_back(100);
  r.on_request(req(kSendOnly, 100, 0, 10, true));
  r.on_request(req(kSendOnly, 100, 0, 10, true));  // its ACK was lost; resent
  EXPECT_EQ(env.done.size(), 1u);
  ASSERT_EQ(env.sent.size(), 2u);
  EXPECT_EQ(env.sent[1].op, kAcknowledge);
  EXPECT_EQ(env.sent[1].psn, 100u);
  EXPECT_EQ(env.posted.size(), 1u);
}

TEST_F(RcResponderTest, ADuplicateWriteIsAckedAtItsOwnPsnNotAtALaterRead) {
  deliver(message(MsgKind::kWrite, 100, 10));  // PSN 100, ACKed
  Packet rd = req(kReadRequest, 101);
  rd.va = kVa;
  rd.rkey = kRkey;
  rd.dma_len = 8;
  r.on_request(rd);                            // PSN 101: a READ
  deliver(message(MsgKind::kWrite, 100, 10));  // the WRITE again (its ACK was lost)
  EXPECT_EQ(env.sent.back().op, kAcknowledge);
  EXPECT_EQ(env.sent.back().psn, 100u);
}

TEST_F(RcResponderTest, WriteLandsExactlyAndLengthOrKeyErrorsFail) {
  deliver(message(MsgKind::kWrite, 100, 700, kVa + 5));
  EXPECT_EQ(memcmp(env.mem.data() + 5, data.data(), 700), 0);
  EXPECT_EQ(env.mem[4], 0);
  EXPECT_EQ(env.mem[705], 0);
  EXPECT_EQ(env.sent.back().psn, 102u);
  EXPECT_TRUE(env.errors.empty());
  // A WRITE whose packets carry less than its DMA length: invalid request.
  auto short_write = message(MsgKind::kWrite, 103, 300);
  short_write.back().payload = short_write.back().payload.first(10);
  deliver(short_write);
  EXPECT_EQ(env.sent.back().syndrome, syndrome_nak(NakCode::kInvalidRequest));
  ASSERT_EQ(env.errors.size(), 1u);
  EXPECT_EQ(env.errors[0], AsyncEvent::kQpReqErr);
  EXPECT_TRUE(r.failed());
}

TEST_F(RcResponderTest, BadRkeyIsRemoteAccessNak) {
  auto m = message(MsgKind::kWrite, 100, 10);
  m[0].rkey = 0x2000;
  deliver(m);
  EXPECT_EQ(env.sent.back().syndrome, syndrome_nak(NakCode::kRemoteAccessError));
  EXPECT_EQ(env.errors.back(), AsyncEvent::kQpAccessErr);
  r.on_request(req(kSendOnly, 101, 0, 1, true));  // a QP in ERR answers nothing more
  EXPECT_EQ(env.sent.size(), 1u);
}

TEST_F(RcResponderTest, ReadIsAnsweredInPmtuPiecesAndReexecutedWhenDuplicated) {
  for (size_t i = 0; i < env.mem.size(); ++i) env.mem[i] = uint8_t(i);
  Packet rd = req(kReadRequest, 100);
  rd.va = kVa + 3;
  rd.rkey = kRkey;
  rd.dma_len = 600;
  r.on_request(rd);
  ASSERT_EQ(env.sent.size(), 3u);
  EXPECT_EQ(env.sent[0].op, kReadResponseFirst);
  EXPECT_EQ(env.sent[1].op, kReadResponseMiddle);
  EXPECT_EQ(env.sent[2].op, kReadResponseLast);
  std::vector<uint8_t> got;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(env.sent[i].psn, 100u + i);
    got.insert(got.end(), env.sent[i].payload.begin(), env.sent[i].payload.end());
  }
  ASSERT_EQ(got.size(), 600u);
  EXPECT_EQ(memcmp(got.data(), env.mem.data() + 3, 600), 0);
  EXPECT_EQ(r.epsn(), 103u);  // a READ takes one PSN per response packet
  env.mem[3] = 0xee;          // changed since: the duplicate READ sees it
  r.on_request(rd);
  ASSERT_EQ(env.sent.size(), 6u);
  EXPECT_EQ(env.sent[3].psn, 100u);
  EXPECT_EQ(env.sent[3].payload[0], 0xee);
  // A READ outside the region: remote access NAK, nothing read.
  Packet far = req(kReadRequest, 103);
  far.va = kVa + 4000;
  far.rkey = kRkey;
  far.dma_len = 600;
  r.on_request(far);
  ASSERT_EQ(env.sent.size(), 7u);
  EXPECT_EQ(env.sent.back().syndrome, syndrome_nak(NakCode::kRemoteAccessError));
  EXPECT_TRUE(env.sent.back().payload.empty());
}

TEST_F(RcResponderTest, AtomicsExecuteOnceAndDuplicatesGetTheFirstResult) {
  uint64_t v = 40;
  memcpy(env.mem.data() + 8, &v, 8);
  Packet fa = req(kFetchAdd, 100);
  fa.va = kVa + 8;
  fa.rkey = kRkey;
  fa.swap_add = 2;
  r.on_request(fa);
  r.on_request(fa);  // duplicate: not added twice
  memcpy(&v, env.mem.data() + 8, 8);
  EXPECT_EQ(v, 42u);
  ASSERT_EQ(env.sent.size(), 2u);
  for (auto& s : env.sent) {
    EXPECT_EQ(s.op, kAtomicAcknowledge);
    EXPECT_EQ(s.orig, 40u);
    EXPECT_EQ(s.psn, 100u);
  }
  Packet cas = req(kCompareSwap, 101);
  cas.va = kVa + 8;
  cas.rkey = kRkey;
  cas.compare = 42;
  cas.swap_add = 7;
  r.on_request(cas);
  memcpy(&v, env.mem.data() + 8, 8);
  EXPECT_EQ(v, 7u);
  Packet bad = cas;
  bad.bth.psn = 102;
  bad.va = kVa + 4;  // not 8-byte aligned
  r.on_request(bad);
  EXPECT_EQ(env.sent.back().syndrome, syndrome_nak(NakCode::kInvalidRequest));
}

// IBA 1.5 ATOMIC WRITE: 8 bytes stored at an aligned address, answered by
// an ACK; a duplicate is acknowledged and not stored again; misaligned, a
// length other than 8, or a region the QP may not write: NAKs.
TEST_F(RcResponderTest, AtomicWriteStoresEightBytesOnceAndIsAcked) {
  std::vector<uint8_t> v = {1, 2, 3, 4, 5, 6, 7, 8};
  data.assign(v.begin(), v.end());
  auto m = message(MsgKind::kAtomicWrite, 100, 8, kVa + 16);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].bth.opcode & 0x1f, kAtomicWrite);
  deliver(m);
  EXPECT_EQ(memcmp(env.mem.data() + 16, v.data(), 8), 0);
  ASSERT_EQ(env.sent.size(), 1u);
  EXPECT_EQ(env.sent[0].op, kAcknowledge);
  EXPECT_EQ(env.sent[0].psn, 100u);
  EXPECT_EQ(ack_type(env.sent[0].syndrome), AckType::kAck);
  EXPECT_EQ(env.sent[0].msn, 1u);
  // The target changes the word; the duplicate must not put the old one back.
  env.mem[16] = 99;
  deliver(m);
  EXPECT_EQ(env.mem[16], 99);
  EXPECT_EQ(env.sent.back().op, kAcknowledge);
  EXPECT_EQ(r.epsn(), 101u);
}

TEST_F(RcResponderTest, AtomicWriteMisalignedOrNotEightBytesIsInvalidRequest) {
  data.assign(16, 7);
  deliver(message(MsgKind::kAtomicWrite, 100, 8, kVa + 4));
  ASSERT_EQ(env.sent.size(), 1u);
  EXPECT_EQ(env.sent[0].syndrome, syndrome_nak(NakCode::kInvalidRequest));
  ASSERT_EQ(env.errors.size(), 1u);
  EXPECT_EQ(env.errors[0], AsyncEvent::kQpReqErr);
  FakeEnv e2;
  RcResponder r2{cfg, &e2};
  auto m = message(MsgKind::kAtomicWrite, 100, 8, kVa);
  m[0].dma_len = 16;
  r2.on_request(m[0]);
  ASSERT_EQ(e2.sent.size(), 1u);
  EXPECT_EQ(e2.sent[0].syndrome, syndrome_nak(NakCode::kInvalidRequest));
  FakeEnv e3;
  e3.rights = transport::access::kRemoteRead | transport::access::kRemoteAtomic;  // no remote write
  RcResponder r3{cfg, &e3};
  r3.on_request(message(MsgKind::kAtomicWrite, 100, 8, kVa)[0]);
  ASSERT_EQ(e3.sent.size(), 1u);
  EXPECT_EQ(e3.sent[0].syndrome, syndrome_nak(NakCode::kRemoteAccessError));
}

TEST_F(RcResponderTest, OutOfSequenceOpcodeIsInvalidRequest) {
  env.posted.emplace_back(1000);
  r.on_request(req(kSendFirst, 100, 0, kPmtu));
  r.on_request(req(kWriteLast, 101, 0, 10, true));  // a WRITE LAST inside a SEND
  EXPECT_EQ(env.sent.back().syndrome, syndrome_nak(NakCode::kInvalidRequest));
  EXPECT_TRUE(r.failed());
}

TEST_F(RcResponderTest, SendLongerThanTheReceiveFailsWithLengthError) {
  env.posted.emplace_back(100);
  deliver(message(MsgKind::kSend, 100, 300));
  ASSERT_EQ(env.done.size(), 1u);
  EXPECT_EQ(env.done[0].st, WcStatus::kLocLenErr);
  EXPECT_EQ(env.sent.back().syndrome, syndrome_nak(NakCode::kInvalidRequest));
}

TEST_F(RcResponderTest, PsnsWrapAround) {
  ResponderConfig c = cfg;
  c.epsn = kPsnMask;  // 0xffffff
  RcResponder w(c, &env);
  env.posted.emplace_back(1000);
  for (const Packet& p : message(MsgKind::kSend, kPsnMask, 600)) w.on_request(p);
  ASSERT_EQ(env.done.size(), 1u);
  EXPECT_EQ(w.epsn(), 2u);
  EXPECT_EQ(env.sent.back().psn, 1u);
  w.on_request(req(kSendOnly, kPsnMask, 0, 1, true));  // behind: a duplicate, re-ACKed at its PSN
  EXPECT_EQ(env.sent.back().psn, kPsnMask);
  EXPECT_EQ(w.stats().duplicates, 1u);
}

TEST(RcResponderXrc, AnXrcTargetAnswersXrcRequestsWithXrcOpcodesAndDropsRcOnes) {
  // IBA 9.8: an XRC target QP is RC's responder for the XRC service.
  FakeEnv env;
  ResponderConfig c{kPmtu, 0x77, 100, 12, 4};
  c.xrc = true;
  RcResponder r{c, &env};
  std::vector<uint8_t> data(100, 9);
  env.posted.emplace_back(1000);
  Packet rc;
  rc.bth.opcode = opcode(Service::kRc, kSendOnly);
  rc.bth.psn = 100;
  rc.bth.ack_req = true;
  rc.payload = std::span<const uint8_t>(data.data(), data.size());
  r.on_request(rc);
  EXPECT_TRUE(env.sent.empty()) << "an RC request reached an XRC target";
  EXPECT_TRUE(env.done.empty());
  Packet x = rc;
  x.bth.opcode = opcode(Service::kXrc, kSendOnly);
  x.xrc_srqn = 0x10;
  r.on_request(x);
  ASSERT_EQ(env.done.size(), 1u);
  EXPECT_EQ(env.done[0].len, 100u);
  ASSERT_EQ(env.sent.size(), 1u);
  EXPECT_EQ(env.sent[0].op, kAcknowledge);
  EXPECT_EQ(env.sent[0].service, uint8_t(Service::kXrc));
  EXPECT_EQ(r.epsn(), 101u);
}

// Selective repeat (ResponderConfig::keep_ooo): packets past a gap wait
// and are executed, in order, when the gap fills.
class KeepingResponderTest : public RcResponderTest {
 protected:
  KeepingResponderTest() {
    cfg.keep_ooo = 64;
    r = RcResponder(cfg, &env);
  }
};

TEST_F(KeepingResponderTest, PacketsPastAGapWaitAndFollowTheResendWithOneAck) {
  for (int i = 0; i < 4; ++i) env.posted.emplace_back(1000);
  auto m = message(MsgKind::kSend, 100, 600);               // 100..102
  auto w = message(MsgKind::kWrite, 103, 300, kVa + 1000);  // 103..104
  r.on_request(m[1]);                                       // 100 lost
  r.on_request(m[2]);
  r.on_request(w[0]);
  r.on_request(w[1]);
  ASSERT_EQ(env.sent.size(), 1u);
  EXPECT_EQ(env.sent[0].syndrome, syndrome_nak(NakCode::kPsnSequenceError));
  EXPECT_EQ(env.sent[0].psn, 100u);
  EXPECT_TRUE(env.done.empty()) << "nothing executes before the gap fills";
  EXPECT_EQ(r.stats().ooo_kept, 4u);
  EXPECT_EQ(r.stats().dropped, 0u);
  r.on_request(m[0]);  // the resend
  ASSERT_EQ(env.done.size(), 1u);
  EXPECT_EQ(env.done[0].len, 600u);
  EXPECT_EQ(memcmp(env.done[0].data.data(), data.data(), 600), 0);
  EXPECT_EQ(memcmp(env.mem.data() + 1000, data.data(), 300), 0) << "the WRITE placed where its RETH said";
  EXPECT_EQ(r.epsn(), 105u);
  EXPECT_EQ(r.stats().ooo_replayed, 4u);
  ASSERT_EQ(env.sent.size(), 2u) << "one ACK for everything the resend let through";
  EXPECT_EQ(ack_type(env.sent[1].syndrome), AckType::kAck);
  EXPECT_EQ(env.sent[1].psn, 104u);
  EXPECT_EQ(env.sent[1].msn, 2u);
}

TEST_F(KeepingResponderTest, TheNextGapIsNakedAsSoonAsTheFirstFills) {
  for (int i = 0; i < 8; ++i) env.posted.emplace_back(100);
  // 100 and 103 lost; 101, 102, 104, 105 kept.
  for (uint32_t psn : {101u, 102u, 104u, 105u}) r.on_request(req(kSendOnly, psn, 0, 10, true));
  ASSERT_EQ(env.sent.size(), 1u);
  r.on_request(req(kSendOnly, 100, 0, 10, true));
  EXPECT_EQ(env.done.size(), 3u);
  ASSERT_EQ(env.sent.size(), 2u);
  EXPECT_EQ(env.sent[1].syndrome, syndrome_nak(NakCode::kPsnSequenceError));
  EXPECT_EQ(env.sent[1].psn, 103u) << "a NAK at the next gap (it acknowledges 100..102)";
  r.on_request(req(kSendOnly, 103, 0, 10, true));
  EXPECT_EQ(env.done.size(), 6u);
  ASSERT_EQ(env.sent.size(), 3u);
  EXPECT_EQ(ack_type(env.sent[2].syndrome), AckType::kAck);
  EXPECT_EQ(env.sent[2].psn, 105u);
}

TEST_F(KeepingResponderTest, AGoBackNRequesterStillGetsEverythingOnce) {
  // A requester that does not know (kernel rxe) sends everything after the
  // gap again: those are duplicates now, acknowledged, not executed twice.
  for (int i = 0; i < 8; ++i) env.posted.emplace_back(100);
  for (uint32_t psn : {101u, 102u, 103u}) r.on_request(req(kSendOnly, psn, 0, 10, true));
  for (uint32_t psn : {100u, 101u, 102u, 103u}) r.on_request(req(kSendOnly, psn, 0, 10, true));
  EXPECT_EQ(env.done.size(), 4u);
  EXPECT_EQ(r.epsn(), 104u);
  EXPECT_EQ(r.stats().duplicates, 3u);
  EXPECT_EQ(ack_type(env.sent.back().syndrome), AckType::kAck);
}

TEST_F(KeepingResponderTest, AnRnrOnTheWayDropsWhatWaitsBehindIt) {
  env.posted.emplace_back(100);  // room for 100 only
  for (uint32_t psn : {101u, 102u}) r.on_request(req(kSendOnly, psn, 0, 10, true));
  r.on_request(req(kSendOnly, 100, 0, 10, true));
  EXPECT_EQ(env.done.size(), 1u);
  ASSERT_EQ(env.sent.size(), 2u);
  EXPECT_EQ(ack_type(env.sent[1].syndrome), AckType::kRnrNak);
  EXPECT_EQ(env.sent[1].psn, 101u);
  // The requester retries from 101 after the RNR timer: both go again.
  env.posted.emplace_back(100);
  env.posted.emplace_back(100);
  for (uint32_t psn : {101u, 102u}) r.on_request(req(kSendOnly, psn, 0, 10, true));
  EXPECT_EQ(env.done.size(), 3u);
  EXPECT_EQ(r.epsn(), 103u);
}

TEST_F(KeepingResponderTest, TooFarAheadOrTwiceIsNotKept) {
  for (int i = 0; i < 4; ++i) env.posted.emplace_back(100);
  r.on_request(req(kSendOnly, 101, 0, 10, false));
  r.on_request(req(kSendOnly, 101, 0, 10, false));       // a duplicate of a kept packet
  r.on_request(req(kSendOnly, 100 + 64, 0, 10, false));  // beyond keep_ooo
  EXPECT_EQ(r.stats().ooo_kept, 1u);
  r.on_request(req(kSendOnly, 100, 0, 10, true));
  EXPECT_EQ(env.done.size(), 2u) << "100 and the kept 101, once";
  EXPECT_EQ(r.epsn(), 102u);
}

TEST_F(KeepingResponderTest, AnAtomicAndAReadPastTheGapRunInOrder) {
  env.posted.emplace_back(100);
  Packet a = req(kFetchAdd, 101);
  a.va = kVa + 64;
  a.rkey = kRkey;
  a.swap_add = 5;
  Packet rd = req(kReadRequest, 102);
  rd.va = kVa + 64;
  rd.rkey = kRkey;
  rd.dma_len = 8;
  r.on_request(a);
  r.on_request(rd);
  ASSERT_EQ(env.sent.size(), 1u);  // the NAK only
  Packet s = req(kSendOnly, 100, 0, 10, true);
  r.on_request(s);
  ASSERT_EQ(env.sent.size(), 3u);  // the atomic ACK and the READ response; the SEND's ACK is implied
  EXPECT_EQ(env.sent[1].op, kAtomicAcknowledge);
  EXPECT_EQ(env.sent[1].psn, 101u);
  EXPECT_EQ(env.sent[2].op, kReadResponseOnly);
  EXPECT_EQ(env.sent[2].psn, 102u);
  uint64_t v;
  memcpy(&v, env.sent[2].payload.data(), 8);
  EXPECT_EQ(v, 5u) << "the READ saw the atomic that came before it";
  EXPECT_EQ(r.epsn(), 103u);
}

}  // namespace
}  // namespace uroce::transport
