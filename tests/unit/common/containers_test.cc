// SmallVec and RingQueue: the send queue's containers (no allocation per
// work request), checked against the standard containers they replace.
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include "common/ring_queue.h"
#include "common/small_vec.h"

namespace uroce {
namespace {

TEST(SmallVec, StaysInPlaceUpToItsCapacityAndSpillsBeyond) {
  SmallVec<uint32_t, 4> v;
  const uint32_t* in_place = v.data();
  for (uint32_t i = 0; i < 4; ++i) v.push_back(i);
  EXPECT_EQ(v.data(), in_place);
  for (uint32_t i = 4; i < 100; ++i) v.push_back(i);
  EXPECT_NE(v.data(), in_place);
  ASSERT_EQ(v.size(), 100u);
  for (uint32_t i = 0; i < 100; ++i) EXPECT_EQ(v[i], i);
}

TEST(SmallVec, MovesAndCopiesKeepTheElements) {
  for (size_t n : {0u, 3u, 4u, 5u, 40u}) {
    SmallVec<uint8_t, 4> a;
    std::vector<uint8_t> want;
    for (size_t i = 0; i < n; ++i) {
      a.push_back(uint8_t(i * 7));
      want.push_back(uint8_t(i * 7));
    }
    SmallVec<uint8_t, 4> copy(a);
    SmallVec<uint8_t, 4> moved(std::move(a));
    EXPECT_TRUE(a.empty());
    EXPECT_EQ(std::vector<uint8_t>(copy.begin(), copy.end()), want) << n;
    EXPECT_EQ(std::vector<uint8_t>(moved.begin(), moved.end()), want) << n;
    SmallVec<uint8_t, 4> assigned;
    assigned.push_back(99);
    assigned = std::move(moved);
    EXPECT_EQ(std::vector<uint8_t>(assigned.begin(), assigned.end()), want) << n;
    assigned.assign(want.data(), want.data() + want.size() / 2);
    EXPECT_EQ(assigned.size(), n / 2);
  }
}

TEST(RingQueue, BehavesLikeADequeUsedAsAQueue) {
  // Random pushes and pops across several growths and wrap-arounds; the
  // elements own heap memory (a popped slot must let it go).
  std::mt19937 rng(3);
  RingQueue<std::vector<int>> q;
  std::deque<std::vector<int>> ref;
  int next = 0;
  for (int step = 0; step < 20000; ++step) {
    if (ref.empty() || rng() % 3 != 0) {
      q.emplace_back() = std::vector<int>(size_t(next % 5), next);
      ref.push_back(std::vector<int>(size_t(next % 5), next));
      ++next;
    } else {
      ASSERT_EQ(q.front(), ref.front());
      q.pop_front();
      ref.pop_front();
    }
    ASSERT_EQ(q.size(), ref.size());
    if (step % 997 == 0) {
      size_t i = 0;
      for (const auto& e : q) ASSERT_EQ(e, ref[i++]);
      ASSERT_EQ(i, ref.size());
    }
  }
  while (!ref.empty()) {
    ASSERT_EQ(q.front(), ref.front());
    q.pop_front();
    ref.pop_front();
  }
  EXPECT_TRUE(q.empty());
  EXPECT_TRUE(q.emplace_back().empty());  // a reused slot comes back reset
}

}  // namespace
}  // namespace uroce
