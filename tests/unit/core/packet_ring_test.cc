// The packet ring uroced will use to hand received datagrams to their owner:
// order, exact bytes and sources across wrap-around, drops (never blocking)
// when full, and a producer and a consumer thread moving 10^6 packets.
#include "core/packet_ring.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace uroce::core {
namespace {

struct Fixture {
  explicit Fixture(uint64_t size) : mem(sizeof(PacketRing) + size + 64) {
    base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(mem.data()) + 63) & ~uintptr_t(63));
    r = new (base) PacketRing();
    packet_ring_init(r, size, sizeof(PacketRing));
  }
  std::vector<uint8_t> mem;
  uint8_t* base;
  PacketRing* r;
};

std::vector<uint8_t> pkt(uint32_t i) {
  std::vector<uint8_t> p(i % 300);
  for (size_t k = 0; k < p.size(); ++k) p[k] = uint8_t(i + k * 13);
  return p;
}

TEST(PacketRing, OrderBytesAndSourcesAcrossWrapAround) {
  Fixture f(4096);
  uint32_t next_in = 0, next_out = 0;
  for (int round = 0; round < 200; ++round) {
    while (packet_ring_put(f.r, pkt(next_in), next_in, uint16_t(next_in))) ++next_in;
    while (packet_ring_get(f.r, [&](std::span<const uint8_t> b, uint32_t ip, uint16_t port) {
      std::vector<uint8_t> want = pkt(next_out);
      ASSERT_EQ(std::vector<uint8_t>(b.begin(), b.end()), want) << next_out;
      EXPECT_EQ(ip, next_out);
      EXPECT_EQ(port, uint16_t(next_out));
      ++next_out;
    })) {
    }
    ASSERT_EQ(next_out, next_in);
  }
  EXPECT_GT(next_in, 2000u);  // the ring wrapped many times
}

TEST(PacketRing, AFullRingDropsAndCounts) {
  Fixture f(4096);
  std::vector<uint8_t> big(1000, 1);
  int fitted = 0;
  while (packet_ring_put(f.r, big, 0, 0)) ++fitted;
  EXPECT_EQ(fitted, 4);  // 4 records of 1,024 bytes
  EXPECT_EQ(f.r->dropped, 1u);
  EXPECT_FALSE(packet_ring_put(f.r, std::vector<uint8_t>(3000), 0, 0));  // over half the ring: never fits
  EXPECT_EQ(f.r->dropped, 2u);
  int got = 0;
  while (packet_ring_get(f.r,
                         [&](std::span<const uint8_t> b, uint32_t, uint16_t) { EXPECT_EQ(b.size(), 1000u); }))
    ++got;
  EXPECT_EQ(got, 4);
}

TEST(PacketRing, ProducerAndConsumerThreads) {
  Fixture f(1 << 16);
  constexpr uint32_t n = 1000000;
  std::thread producer([&] {
    for (uint32_t i = 0; i < n;) {
      std::vector<uint8_t> p = pkt(i);
      if (packet_ring_put(f.r, p, i, 0)) ++i;
    }
  });
  uint32_t next = 0;
  bool ok = true;
  while (next < n && ok) {
    packet_ring_get(f.r, [&](std::span<const uint8_t> b, uint32_t ip, uint16_t) {
      ok = ip == next && b.size() == next % 300 && (b.empty() || b[0] == uint8_t(next));
      ++next;
    });
  }
  producer.join();
  EXPECT_TRUE(ok) << "at packet " << next;
  EXPECT_EQ(next, n);
}

}  // namespace
}  // namespace uroce::core
