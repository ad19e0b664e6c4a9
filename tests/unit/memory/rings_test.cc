// The shared-memory rings: CQ (many producers, one consumer, arm/notify)
// and RQ (one producer, many claimers).
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "contract/shm_layout.h"
#include "memory/cq_ring.h"
#include "memory/rq_ring.h"

namespace uroce::core {
namespace {

struct CqFixture {
  explicit CqFixture(uint32_t cap) : mem(sizeof(CqRing) + cq_slot_array_bytes(cap) + 64) {
    base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(mem.data()) + 63) & ~uintptr_t(63));
    r = new (base) CqRing();
    r->capacity = cap;
    r->mask = cap - 1;
    r->slots_off = sizeof(CqRing);
  }
  std::vector<uint8_t> mem;
  uint8_t* base;
  CqRing* r;
};

TEST(CqRing, PushPopInOrder) {
  CqFixture f(8);
  for (uint64_t i = 0; i < 5; ++i) {
    Cqe c{};
    c.wr_id = i;
    EXPECT_EQ(cq_push(f.base, f.r, c, false), CqPush::kOk);
  }
  Cqe out[8];
  ASSERT_EQ(cq_pop(f.base, f.r, out, 8), 5);
  for (uint64_t i = 0; i < 5; ++i) EXPECT_EQ(out[i].wr_id, i);
  EXPECT_EQ(cq_pop(f.base, f.r, out, 8), 0);
}

TEST(CqRing, OverflowIsReportedNotOverwritten) {
  CqFixture f(4);
  Cqe c{};
  for (int i = 0; i < 4; ++i) EXPECT_NE(cq_push(f.base, f.r, c, false), CqPush::kOverflow);
  EXPECT_EQ(cq_push(f.base, f.r, c, false), CqPush::kOverflow);
  EXPECT_EQ(f.r->overflow.load(), 1u);
}

TEST(CqRing, AStaleHeadCopyIsRefreshedOnlyWhenTheRingLooksFull) {
  CqFixture f(4);
  Cqe c{}, out[4];
  uint64_t head_seen = 0;
  for (int i = 0; i < 4; ++i) ASSERT_EQ(cq_push(f.base, f.r, c, false, nullptr, &head_seen), CqPush::kOk);
  EXPECT_EQ(cq_push(f.base, f.r, c, false, nullptr, &head_seen), CqPush::kOverflow);
  f.r->overflow.store(0);
  ASSERT_EQ(cq_pop(f.base, f.r, out, 3), 3);
  EXPECT_EQ(head_seen, 0u);  // not refreshed yet
  for (int i = 0; i < 3; ++i) ASSERT_EQ(cq_push(f.base, f.r, c, false, nullptr, &head_seen), CqPush::kOk);
  EXPECT_EQ(head_seen, 3u);
  EXPECT_EQ(cq_push(f.base, f.r, c, false, nullptr, &head_seen), CqPush::kOverflow);
}

TEST(CqRing, ArmFiresOnceAndSolicitedFilters) {
  CqFixture f(8);
  Cqe c{};
  f.r->armed.store(kArmNext);
  EXPECT_EQ(cq_push(f.base, f.r, c, false), CqPush::kOkNotify);
  EXPECT_EQ(cq_push(f.base, f.r, c, false), CqPush::kOk);  // disarmed after one notification
  f.r->armed.store(kArmSolicited);
  EXPECT_EQ(cq_push(f.base, f.r, c, false), CqPush::kOk);  // unsolicited: no wake-up
  EXPECT_EQ(cq_push(f.base, f.r, c, true), CqPush::kOkNotify);
}

TEST(CqRing, ManyProducersLoseNothing) {
  constexpr int kThreads = 4, kPer = 20000;
  CqFixture f(1024);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      uint64_t head_seen = 0;  // each producer's private copy of head, as requesters keep one
      for (int i = 0; i < kPer; ++i) {
        Cqe c{};
        c.wr_id = uint64_t(t) << 32 | uint64_t(i);
        while (cq_push(f.base, f.r, c, false, nullptr, &head_seen) == CqPush::kOverflow)
          std::this_thread::yield();
      }
    });
  }
  std::vector<int> next(kThreads, 0);
  int total = 0;
  Cqe out[64];
  while (total < kThreads * kPer) {
    int n = cq_pop(f.base, f.r, out, 64);
    for (int i = 0; i < n; ++i) {
      int t = int(out[i].wr_id >> 32);
      // Per-producer order is preserved.
      ASSERT_EQ(int(out[i].wr_id & 0xffffffff), next[t]++);
    }
    total += n;
  }
  for (auto& t : ts) t.join();
}

TEST(CqRing, ResizeWhileProducersRunLosesNothing) {
  constexpr int kThreads = 3, kPer = 30000;
  // One arena: ring header + first slots, then room for the bigger arrays.
  std::vector<uint8_t> mem(sizeof(CqRing) + cq_slot_array_bytes(64 + 128 + 256 + 512) + 64);
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(mem.data()) + 63) & ~uintptr_t(63));
  CqRing* r = new (base) CqRing();
  r->capacity = 64;
  r->mask = 63;
  r->slots_off = sizeof(CqRing);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < kPer; ++i) {
        Cqe c{};
        c.wr_id = uint64_t(t) << 32 | uint64_t(i);
        while (cq_push(base, r, c, false) == CqPush::kOverflow) std::this_thread::yield();
      }
    });
  }
  std::vector<int> next(kThreads, 0);
  int total = 0, resizes = 0;
  uint64_t off = sizeof(CqRing) + cq_slot_array_bytes(64);
  Cqe out[16];
  while (total < kThreads * kPer) {
    if (resizes < 3 && total > (resizes + 1) * 10000) {
      uint32_t cap = r->capacity * 2;
      EXPECT_TRUE(cq_resize(base, r, off, cap));
      off += cq_slot_array_bytes(cap);
      ++resizes;
    }
    int n = cq_pop(base, r, out, 16);
    for (int i = 0; i < n; ++i) {
      int t = int(out[i].wr_id >> 32);
      ASSERT_EQ(int(out[i].wr_id & 0xffffffff), next[t]++);
    }
    total += n;
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(resizes, 3);
  EXPECT_EQ(r->capacity, 512u);
}

TEST(CqRing, BouncedPayloadIsDeliveredAtPollAndSurvivesResize) {
  std::vector<uint8_t> mem(sizeof(CqRing) + cq_slot_array_bytes(4) + cq_slot_array_bytes(8) + 64);
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(mem.data()) + 63) & ~uintptr_t(63));
  CqRing* r = new (base) CqRing();
  r->capacity = 4;
  r->mask = 3;
  r->slots_off = sizeof(CqRing);
  char dst[3][16] = {};
  const char* words[3] = {"first", "second!", "third.."};
  for (int i = 0; i < 3; ++i) {
    // The payload is gathered from two pieces.
    iovec src[2] = {{const_cast<char*>(words[i]), 3},
                    {const_cast<char*>(words[i]) + 3, strlen(words[i]) - 3}};
    CqBounce b{reinterpret_cast<uint64_t>(dst[i]), src, 2, uint32_t(strlen(words[i]))};
    Cqe c{};
    c.wr_id = uint64_t(i);
    c.byte_len = b.len;
    c.wc_flags = kCqeBounced;
    ASSERT_EQ(cq_push(base, r, c, false, &b), CqPush::kOk);
    EXPECT_EQ(dst[i][0], 0);  // nothing lands before the completion is polled
  }
  Cqe out[4];
  ASSERT_EQ(cq_pop(base, r, out, 1), 1);
  EXPECT_STREQ(dst[0], "first");
  EXPECT_EQ(out[0].wc_flags, 0u);  // the internal flag never reaches the program
  ASSERT_TRUE(cq_resize(base, r, sizeof(CqRing) + cq_slot_array_bytes(4), 8));
  ASSERT_EQ(cq_pop(base, r, out, 4), 2);
  EXPECT_STREQ(dst[1], "second!");
  EXPECT_STREQ(dst[2], "third..");
}

struct RqFixture {
  RqFixture(uint32_t max_wr, uint32_t max_sge) {
    uint32_t slots = 1;
    while (slots < max_wr) slots <<= 1;
    stride = uint32_t(sizeof(RqWqe) + sizeof(Sge) * max_sge);
    mem.resize(sizeof(RqRing) + slots * stride + 64);
    base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(mem.data()) + 63) & ~uintptr_t(63));
    r = new (base) RqRing();
    r->max_wr = max_wr;
    r->mask = slots - 1;
    r->max_sge = max_sge;
    r->stride = stride;
    r->slots_off = sizeof(RqRing);
  }
  std::vector<uint8_t> mem;
  uint8_t* base;
  RqRing* r;
  uint32_t stride;
};

TEST(RqRing, DepthIsEnforced) {
  RqFixture f(3, 2);
  Sge s[2] = {{1, 2, 3}, {4, 5, 6}};
  uint64_t hs = 0;
  EXPECT_TRUE(rq_post(f.base, f.r, 1, s, 2, &hs));
  EXPECT_TRUE(rq_post(f.base, f.r, 2, s, 1, &hs));
  EXPECT_TRUE(rq_post(f.base, f.r, 3, s, 0, &hs));
  EXPECT_FALSE(rq_post(f.base, f.r, 4, s, 1, &hs));  // max_wr reached: ENOMEM at the verbs layer
  ClaimedRecv c;
  uint64_t left;
  ASSERT_TRUE(rq_claim(f.base, f.r, &c, &left));
  EXPECT_EQ(c.wr_id, 1u);
  EXPECT_EQ(c.num_sge, 2u);
  EXPECT_EQ(c.sge[1].lkey, 6u);
  EXPECT_EQ(left, 2u);
  EXPECT_TRUE(rq_post(f.base, f.r, 4, s, 1, &hs));  // the stale head copy is refreshed when "full"
  EXPECT_EQ(hs, 1u);
}

TEST(RqRing, PrivateIndexCopiesNeverOverstate) {
  RqFixture f(4, 1);
  Sge s{7, 8, 9};
  uint64_t head_seen = 0, tail_seen = 0;
  ClaimedRecv c;
  uint64_t left;
  EXPECT_FALSE(rq_claim(f.base, f.r, &c, &left, &tail_seen));  // empty: tail loaded, still empty
  ASSERT_TRUE(rq_post(f.base, f.r, 10, &s, 1, &head_seen));
  ASSERT_TRUE(rq_post(f.base, f.r, 11, &s, 1, &head_seen));
  ASSERT_TRUE(rq_claim(f.base, f.r, &c, &left, &tail_seen));  // copy said empty: reloaded
  EXPECT_EQ(c.wr_id, 10u);
  EXPECT_EQ(tail_seen, 2u);
  ASSERT_TRUE(rq_claim(f.base, f.r, &c, &left, &tail_seen));  // from the copy, no reload
  EXPECT_EQ(c.wr_id, 11u);
  EXPECT_FALSE(rq_claim(f.base, f.r, &c, &left, &tail_seen));
  // The owner's copy of head is 0 (stale): it still finds the room the claims made.
  for (uint64_t id = 12; id < 16; ++id) ASSERT_TRUE(rq_post(f.base, f.r, id, &s, 1, &head_seen)) << id;
  EXPECT_EQ(head_seen, 2u);
  EXPECT_FALSE(rq_post(f.base, f.r, 16, &s, 1, &head_seen));
  for (uint64_t id = 12; id < 16; ++id) {
    ASSERT_TRUE(rq_claim(f.base, f.r, &c, &left, &tail_seen));
    EXPECT_EQ(c.wr_id, id);
  }
}

TEST(RqRing, ConcurrentClaimersTakeEachWqeOnce) {
  constexpr int kTotal = 50000;
  RqFixture f(64, 1);
  std::atomic<int> claimed{0};
  std::vector<std::atomic<int>> seen(kTotal);
  std::vector<std::thread> ts;
  for (int t = 0; t < 3; ++t) {
    ts.emplace_back([&] {
      ClaimedRecv c;
      uint64_t left;
      while (claimed.load() < kTotal) {
        if (rq_claim(f.base, f.r, &c, &left)) {
          seen[c.wr_id].fetch_add(1);
          claimed.fetch_add(1);
        }
      }
    });
  }
  Sge s{0, 0, 0};
  uint64_t hs = 0;
  for (int i = 0; i < kTotal;) {
    if (rq_post(f.base, f.r, uint64_t(i), &s, 1, &hs)) ++i;
  }
  for (auto& t : ts) t.join();
  for (int i = 0; i < kTotal; ++i) ASSERT_EQ(seen[i].load(), 1) << i;
}

}  // namespace
}  // namespace uroce::core
