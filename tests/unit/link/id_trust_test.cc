// Which solved IPv4 identifications a receiver believes (link/id_trust.h):
// each kind of evidence, the wait for it, and what happens without it.
#include "link/id_trust.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace uroce::link {
namespace {

constexpr uint32_t kPeer = 0x0200000a, kOther = 0x0300000a, kMe = 0x0100000a;  // 10.0.0.x
constexpr uint64_t kMs = 1'000'000;

/// A packet's bytes: a BTH for `dqp` and `psn` and a few payload bytes.
std::vector<uint8_t> pkt(uint32_t dqp, uint32_t psn) {
  std::vector<uint8_t> p(12 + 8 + 4, 0xab);
  p[5] = uint8_t(dqp >> 16), p[6] = uint8_t(dqp >> 8), p[7] = uint8_t(dqp);
  p[9] = uint8_t(psn >> 16), p[10] = uint8_t(psn >> 8), p[11] = uint8_t(psn);
  return p;
}
uint32_t psn_of(const std::vector<uint8_t>& p) { return uint32_t(p[9]) << 16 | uint32_t(p[10]) << 8 | p[11]; }

struct Fixture : ::testing::Test {
  IdTrust t;
  std::vector<uint32_t> got;  // PSNs handed on, in order
  std::vector<uint16_t> ids;
  std::unique_ptr<IdWatchTable> table;
  uint64_t now = 1000 * kMs;

  void TearDown() override { set_id_watch(nullptr); }
  void judge(uint32_t saddr, uint16_t sport, uint32_t dqp, uint32_t psn, uint16_t id) {
    const auto p = pkt(dqp, psn);
    t.judge(p, saddr, sport, kMe, id, now, [&](std::span<const uint8_t> b, uint32_t, uint16_t, uint16_t i) {
      got.push_back(psn_of(std::vector<uint8_t>(b.begin(), b.end())));
      ids.push_back(i);
    });
  }
  void recheck() {
    t.recheck(now, [&](std::span<const uint8_t> b, uint32_t, uint16_t, uint16_t i) {
      got.push_back(psn_of(std::vector<uint8_t>(b.begin(), b.end())));
      ids.push_back(i);
    });
  }
  /// uroced's table, watching.
  void watch() {
    table = std::make_unique<IdWatchTable>();
    table->magic = IdWatchTable::kMagic;
    table->watching = 1;
    set_id_watch(table.get());
  }
  void seen(uint32_t saddr, uint16_t sport, uint32_t dqp, uint32_t psn, uint16_t id) {
    IdKey k;
    k.saddr = saddr;
    k.daddr = kMe;
    k.sport = sport;
    k.dqp = dqp;
    k.psn = psn;
    id_watch_put(table.get(), k, id);
  }
};

TEST_F(Fixture, UroceSendersIdentificationsAreBelievedAsTheyAre) {
  // Expect: 0..63 (0, or the k-th datagram of a GSO send) go at once.
  for (uint16_t id = 0; id < 64; ++id) judge(kPeer, 50000, 0x11, id, id);
  EXPECT_EQ(got.size(), 64u);
  EXPECT_FALSE(t.parked());
}

TEST_F(Fixture, AnUnknownCounterWaitsAndIsDroppedWithoutEvidence) {
  // Expect: a first packet with identification 4000 waits; nothing proves
  // it within kWaitNs (nobody watches frames): dropped and counted.
  judge(kPeer, 50000, 0x11, 7, 4000);
  EXPECT_TRUE(got.empty());
  EXPECT_TRUE(t.parked());
  now += IdTrust::kWaitNs - 1;
  recheck();
  EXPECT_TRUE(t.parked());
  now += 1;
  recheck();
  EXPECT_FALSE(t.parked());
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(t.stats().parked, 1u);
  EXPECT_EQ(t.stats().unproven, 1u);
}

TEST_F(Fixture, ASuccessorProvesItsPredecessorAndBothGoInOrder) {
  // Expect: kernel rxe's hashed counter (one per pair of hosts): 4000, then
  // 4003 (steps of other flows between) — both go, the first first.
  judge(kPeer, 50000, 0x11, 7, 4000);
  judge(kPeer, 50001, 0x12, 9, 4003);
  EXPECT_EQ(got, (std::vector<uint32_t>{7, 9}));
  EXPECT_EQ(t.stats().succeeded, 1u);
  // Then the counter is known, for the flow and for the host: a new flow of
  // that host continues it without waiting, and behind a little too.
  judge(kPeer, 50002, 0x13, 1, 4010);
  judge(kPeer, 50000, 0x11, 8, 4005);
  EXPECT_EQ(got, (std::vector<uint32_t>{7, 9, 1, 8}));
  EXPECT_FALSE(t.parked());
}

TEST_F(Fixture, TooFarAfterIsNoSuccessor) {
  // Expect: 4000 then 4000 + kSuccessor + 1: neither proves the other.
  judge(kPeer, 50000, 0x11, 7, 4000);
  judge(kPeer, 50000, 0x11, 8, uint16_t(4000 + IdTrust::kSuccessor + 1));
  EXPECT_TRUE(got.empty());
  // And another host's packet proves nothing of this one's.
  judge(kOther, 50000, 0x11, 9, 4001);
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(t.stats().parked, 3u);
}

TEST_F(Fixture, OnlyTheNextPacketOfTheHostCanProveAParkedOne) {
  // Expect: 4000 waits; the host's next packet (9000) does not continue it:
  // its chance is gone, and 4002 after that proves nothing of it (a
  // corrupted packet solves for a random value: among many later packets
  // one would land just after it).
  judge(kPeer, 50000, 0x11, 1, 4000);
  judge(kPeer, 50000, 0x11, 2, 9000);
  judge(kPeer, 50000, 0x11, 3, 4002);
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(t.stats().parked, 3u);
  // Another host's packets in between change nothing.
  judge(kPeer, 50000, 0x11, 4, 20000);
  judge(kOther, 50000, 0x11, 5, 777);
  judge(kPeer, 50000, 0x11, 6, 20001);
  EXPECT_EQ(got, (std::vector<uint32_t>{4, 6}));
}

TEST_F(Fixture, AKnownCounterIsContinuedWithinItsWindowOnly) {
  judge(kPeer, 50000, 0x11, 1, 1000);
  judge(kPeer, 50000, 0x11, 2, 1001);  // proves 1000: counter next = 1002
  ASSERT_EQ(got.size(), 2u);
  judge(kPeer, 50000, 0x11, 3, uint16_t(1002 + IdTrust::kAhead - 1));  // at the window's far end
  EXPECT_EQ(got.size(), 3u);
  const uint16_t next = uint16_t(1002 + IdTrust::kAhead);
  judge(kPeer, 50000, 0x11, 4, uint16_t(next - IdTrust::kBehind));  // behind, within
  EXPECT_EQ(got.size(), 4u);
  judge(kPeer, 50000, 0x11, 5, uint16_t(next - IdTrust::kBehind - 1));   // behind, beyond
  judge(kPeer, 50000, 0x11, 6, uint16_t(next + IdTrust::kAhead + 100));  // ahead, beyond
  EXPECT_EQ(got.size(), 4u);
  EXPECT_TRUE(t.parked());
}

TEST_F(Fixture, UrocedsRecordOfTheFrameIsEvidence) {
  watch();
  // Expect: the frame seen with this identification: believed at once.
  seen(kPeer, 50000, 0x11, 7, 40000);
  judge(kPeer, 50000, 0x11, 7, 40000);
  EXPECT_EQ(got, (std::vector<uint32_t>{7}));
  EXPECT_EQ(t.stats().vouched, 1u);
  // Expect: a packet uroced has not recorded yet waits; recorded later, it
  // goes on the next look.
  judge(kPeer, 50000, 0x11, 8, 50000);
  EXPECT_EQ(got.size(), 1u);
  now += IdTrust::kWaitNs;  // beyond the wait without a watcher: a watcher is given longer
  recheck();
  EXPECT_TRUE(t.parked());
  seen(kPeer, 50000, 0x11, 8, 50000);
  recheck();
  EXPECT_EQ(got, (std::vector<uint32_t>{7, 8}));
  EXPECT_EQ(t.stats().vouched, 2u);
}

TEST_F(Fixture, AFrameRecordedWithAnotherIdentificationProvesNothing) {
  // Expect: a corrupted packet solves for some identification; the frame
  // uroced saw with the same key carried another: never believed.
  watch();
  seen(kPeer, 50000, 0x11, 7, 40000);
  judge(kPeer, 50000, 0x11, 7, 12345);
  recheck();
  EXPECT_TRUE(got.empty());
  now += IdTrust::kWaitWatchedNs;
  recheck();
  EXPECT_FALSE(t.parked());
  EXPECT_EQ(t.stats().unproven, 1u);
  // Nor does the same identification for another packet (another PSN, QP or port).
  seen(kPeer, 50000, 0x11, 9, 2000);
  judge(kPeer, 50000, 0x11, 10, 2000);
  judge(kPeer, 50000, 0x12, 9, 2000 + 3 * IdTrust::kSuccessor);
  judge(kPeer, 50001, 0x11, 9, 2000 + 6 * IdTrust::kSuccessor);
  EXPECT_TRUE(got.empty());
}

TEST_F(Fixture, TheParkIsBounded) {
  for (uint32_t i = 0; i < IdTrust::kMaxParked + 10; ++i)
    judge(kPeer, 50000, 0x11, i, uint16_t(10000 + 100 * i));  // no two close
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(t.stats().unproven, 10u);  // the oldest went
  EXPECT_EQ(t.stats().parked, IdTrust::kMaxParked + 10);
}

}  // namespace
}  // namespace uroce::link
