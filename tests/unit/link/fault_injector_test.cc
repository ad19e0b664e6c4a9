// The link's fault injector: configured rates are what happens (over 10^5
// packets, same seed same faults), every packet that goes out is an input
// packet (or one with exactly one byte changed when corrupted), a reordered
// packet is overtaken by one packet only, and nothing is held back forever.
#include "link/fault_injector.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <vector>

namespace uroce::link {
namespace {

std::vector<uint8_t> packet(uint32_t i) {
  std::vector<uint8_t> p(16 + i % 17);
  memcpy(p.data(), &i, 4);
  memcpy(p.data() + 4, &i, 4);  // twice: one corrupted byte cannot fake another packet's id
  for (size_t k = 8; k < p.size(); ++k) p[k] = uint8_t(i * 31 + k);
  return p;
}

struct Outcome {
  std::vector<std::vector<uint8_t>> out;
  FaultInjector::Stats stats;
};

Outcome run(const FaultConfig& c, uint32_t n) {
  FaultInjector f(c);
  Outcome r;
  auto emit = [&](std::span<const uint8_t> p, uint64_t) { r.out.emplace_back(p.begin(), p.end()); };
  for (uint32_t i = 0; i < n; ++i) f.process(packet(i), emit);
  f.flush(emit);
  r.stats = f.stats();
  return r;
}

TEST(FaultInjector, ParsesItsSetting) {
  auto c = parse_faults("drop=0.1,dup=0.01,reorder=0.05,corrupt=0.001,seed=42");
  ASSERT_TRUE(c.is_ok());
  EXPECT_DOUBLE_EQ(c->drop, 0.1);
  EXPECT_DOUBLE_EQ(c->corrupt, 0.001);
  EXPECT_EQ(c->seed, 42u);
  EXPECT_TRUE(c->any());
  EXPECT_FALSE(parse_faults("").value().any());
  EXPECT_FALSE(parse_faults("drop=1.5").is_ok());
  EXPECT_FALSE(parse_faults("lose=0.1").is_ok());
  EXPECT_FALSE(parse_faults("drop").is_ok());
  EXPECT_FALSE(parse_faults("seed=x").is_ok());
  EXPECT_EQ(to_string(c.value()), "drop=0.1,dup=0.01,reorder=0.05,corrupt=0.001,seed=42");
}

TEST(FaultInjector, NoFaultsMeansEveryPacketInOrder) {
  Outcome r = run(FaultConfig{}, 1000);
  ASSERT_EQ(r.out.size(), 1000u);
  for (uint32_t i = 0; i < 1000; ++i) EXPECT_EQ(r.out[i], packet(i));
}

TEST(FaultInjector, RatesHappenAndEveryOutputIsAnInputPacket) {
  FaultConfig c{0.1, 0.05, 0.05, 0.02, 7};
  constexpr uint32_t n = 100000;
  Outcome r = run(c, n);
  EXPECT_NEAR(double(r.stats.dropped) / n, 0.1, 0.01);
  EXPECT_NEAR(double(r.stats.duplicated) / n, 0.05 * 0.9, 0.01);
  EXPECT_NEAR(double(r.stats.reordered) / n, 0.045, 0.01);
  EXPECT_NEAR(double(r.stats.corrupted) / double(r.stats.out), 0.02, 0.005);
  EXPECT_EQ(r.stats.out, r.out.size());
  EXPECT_EQ(r.stats.in - r.stats.dropped + r.stats.duplicated, r.stats.out);
  std::map<uint32_t, int> seen;
  uint64_t changed = 0;
  int64_t last = -1, before_last = -1;
  uint64_t behind = 0;
  for (const auto& p : r.out) {
    uint32_t id, id2;
    memcpy(&id, p.data(), 4);
    memcpy(&id2, p.data() + 4, 4);
    if (id != id2) {
      ++changed;  // the corrupted byte is in an id copy
      continue;
    }
    std::vector<uint8_t> want = packet(id);
    ASSERT_EQ(want.size(), p.size());
    size_t diff = 0;
    for (size_t k = 0; k < p.size(); ++k) diff += p[k] != want[k];
    EXPECT_LE(diff, 1u);
    changed += diff;
    ++seen[id];
    if (int64_t(id) < last) {
      ++behind;
      // A reordered packet goes out right after the one packet that overtook it.
      EXPECT_GT(int64_t(id), before_last) << "overtaken by more than one packet";
    } else if (int64_t(id) > last) {
      before_last = last;
      last = id;
    }
  }
  EXPECT_EQ(changed, r.stats.corrupted);
  for (auto& [id, k] : seen) EXPECT_LE(k, 2) << id;
  EXPECT_GT(behind, 0u);
  // Same seed, same faults.
  Outcome again = run(c, n);
  EXPECT_EQ(again.out, r.out);
  c.seed = 8;
  EXPECT_NE(run(c, n).out, r.out);
}

}  // namespace
}  // namespace uroce::link

namespace uroce::link {
namespace {

TEST(FaultInjector, CorruptsOnlyBytesTheIcrcCovers) {
  // Byte 4 of a RoCE packet is the BTH's resv8a (FECN, BECN), which the
  // ICRC leaves out: changed there, a packet would rightly pass the check.
  FaultConfig c;
  c.corrupt = 1;
  c.seed = 9;
  FaultInjector f(c);
  std::vector<uint8_t> pkt(12, 0);
  uint64_t at[12] = {};
  for (int i = 0; i < 12000; ++i)
    f.process(pkt, [&](std::span<const uint8_t> o, uint64_t) {
      for (size_t k = 0; k < o.size(); ++k)
        if (o[k] != pkt[k]) ++at[k];
    });
  EXPECT_EQ(at[4], 0u);
  for (size_t k = 0; k < 12; ++k)
    if (k != 4) EXPECT_GT(at[k], 800u) << "byte " << k;  // ~1,091 each
  EXPECT_EQ(f.stats().corrupted, 12000u);
}

}  // namespace
}  // namespace uroce::link
