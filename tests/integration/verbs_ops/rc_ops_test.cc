// RC data path between two processes: every opcode, message sizes from 0 to
// 1 MiB+3, multiple SGEs on both sides, inline data, unsignaled work
// requests, solicited and fenced requests. Every byte of both buffers is
// checked after each operation (ShadowedMemory), so writes past the end of
// a target range are caught too.
//
// The test process opens its device first and then forks the peer (an
// Agent), which opens its own device after fork: the order a real
// application that forks workers uses.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>

#include "support/verbs_harness.h"

namespace uroce::test {
namespace {

constexpr uint32_t kMiB = 1u << 20;
constexpr uint32_t kSizes[] = {0, 1, 4095, 4096, 65536, kMiB + 3};

// Buffer layout, both sides (4 MiB each). Odd offsets on purpose.
constexpr uint64_t kSrcOff = 3;                   // local gather source
constexpr uint64_t kRecvOff = 0;                  // agent receive buffer
constexpr uint64_t kRecvLen = kMiB + 1024;        // the rest up to kTgtOff is guard
constexpr uint64_t kTgtOff = 2 * kMiB + 5;        // agent RDMA target, local READ destination
constexpr uint64_t kAtomicOff = 3 * kMiB + 512;   // agent atomic word (8-aligned)
constexpr uint64_t kResultOff = 3 * kMiB + 1024;  // local atomic results (8-aligned)

class RcOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EndConfig cfg;
    cfg.bg_seed = 100;
    std::string err;
    ASSERT_TRUE(local_.open(cfg, &err)) << err;
    cfg.bg_seed = 200;
    agent_ = Agent::start(cfg, &err);
    ASSERT_TRUE(agent_) << err;
    ASSERT_TRUE(agent_->connect(local_.info())) << agent_->error();
    ASSERT_TRUE(local_.connect(agent_->info(), &err)) << err;
  }

  static ibv_send_wr wr(uint64_t id, ibv_wr_opcode op, ibv_sge* sg, int n, int flags = IBV_SEND_SIGNALED) {
    ibv_send_wr w;
    memset(&w, 0, sizeof(w));
    w.wr_id = id;
    w.opcode = op;
    w.sg_list = n ? sg : nullptr;
    w.num_sge = n;
    w.send_flags = flags;
    return w;
  }
  static void rdma(ibv_send_wr* w, uint64_t addr, uint32_t rkey) {
    w->wr.rdma.remote_addr = addr;
    w->wr.rdma.rkey = rkey;
  }

  // Posts one signaled WR and expects its successful completion.
  void run(ibv_send_wr w, ibv_wc_opcode expect_opcode) {
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(local_.qp.get(), &w, &bad), 0);
    auto wc = poll_one(local_.scq.get());
    ASSERT_TRUE(wc) << "no send completion for wr_id " << w.wr_id;
    EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << wc_str(*wc);
    EXPECT_EQ(wc->wr_id, w.wr_id) << wc_str(*wc);
    EXPECT_EQ(wc->opcode, expect_opcode) << wc_str(*wc);
    EXPECT_EQ(wc->qp_num, local_.qp->qp_num);
  }

  // The agent's next receive completion.
  void expect_recv(uint64_t wr_id, ibv_wc_opcode op, uint32_t byte_len, bool with_imm, uint32_t imm_host) {
    ibv_wc wc;
    ASSERT_EQ(agent_->poll_recv(&wc), 1) << "no receive completion " << agent_->error();
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
    EXPECT_EQ(wc.wr_id, wr_id) << wc_str(wc);
    EXPECT_EQ(wc.opcode, op) << wc_str(wc);
    EXPECT_EQ(wc.byte_len, byte_len) << wc_str(wc);
    EXPECT_EQ(wc.qp_num, agent_->info().qpn) << wc_str(wc);
    EXPECT_EQ(bool(wc.wc_flags & IBV_WC_WITH_IMM), with_imm) << wc_str(wc);
    if (with_imm) {
      EXPECT_EQ(ntohl(wc.imm_data), imm_host) << wc_str(wc);
    }
  }

  void verify_both() {
    EXPECT_EQ(agent_->verify(), "");
    EXPECT_EQ(local_.mem.verify(), "") << "local memory";
  }

  LocalEnd local_;
  std::unique_ptr<Agent> agent_;
};

TEST_F(RcOpsTest, SendAndSendWithImmAllSizes) {
  uint32_t seed = 1000;
  uint64_t id = 1;
  for (bool imm : {false, true}) {
    for (uint32_t size : kSizes) {
      SCOPED_TRACE(testing::Message() << (imm ? "SEND_WITH_IMM" : "SEND") << " size " << size);
      ++seed;
      ++id;
      ASSERT_EQ(agent_->post_recv(id, {{kRecvOff, uint32_t(kRecvLen)}}), 0);
      local_.mem.fill(kSrcOff, size, seed);
      ibv_sge sg = local_.sge(kSrcOff, size);
      ibv_send_wr w = wr(id, imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, &sg, size ? 1 : 0);
      w.imm_data = imm_be(0xa5000000u | size);
      ASSERT_NO_FATAL_FAILURE(run(w, IBV_WC_SEND));
      ASSERT_NO_FATAL_FAILURE(expect_recv(id, IBV_WC_RECV, size, imm, 0xa5000000u | size));
      ASSERT_TRUE(agent_->expect(kRecvOff, size, seed));
      verify_both();
    }
  }
}

TEST_F(RcOpsTest, RdmaWriteAllSizes) {
  uint32_t seed = 2000;
  for (uint32_t size : kSizes) {
    SCOPED_TRACE(testing::Message() << "RDMA_WRITE size " << size);
    ++seed;
    local_.mem.fill(kSrcOff, size, seed);
    ibv_sge sg = local_.sge(kSrcOff, size);
    ibv_send_wr w = wr(seed, IBV_WR_RDMA_WRITE, &sg, size ? 1 : 0);
    rdma(&w, agent_->raddr(kTgtOff), agent_->rkey());
    ASSERT_NO_FATAL_FAILURE(run(w, IBV_WC_RDMA_WRITE));
    ASSERT_TRUE(agent_->expect(kTgtOff, size, seed));
    verify_both();
  }
}

TEST_F(RcOpsTest, RdmaWriteWithImmConsumesAReceiveButNotItsBuffer) {
  uint32_t seed = 3000;
  for (uint32_t size : kSizes) {
    SCOPED_TRACE(testing::Message() << "RDMA_WRITE_WITH_IMM size " << size);
    ++seed;
    // The receive's buffer must stay untouched: only the immediate arrives there.
    ASSERT_EQ(agent_->post_recv(seed, {{kRecvOff, 4096}}), 0);
    local_.mem.fill(kSrcOff, size, seed);
    ibv_sge sg = local_.sge(kSrcOff, size);
    ibv_send_wr w = wr(seed, IBV_WR_RDMA_WRITE_WITH_IMM, &sg, size ? 1 : 0);
    rdma(&w, agent_->raddr(kTgtOff), agent_->rkey());
    w.imm_data = imm_be(seed);
    ASSERT_NO_FATAL_FAILURE(run(w, IBV_WC_RDMA_WRITE));
    ASSERT_NO_FATAL_FAILURE(expect_recv(seed, IBV_WC_RECV_RDMA_WITH_IMM, size, true, seed));
    ASSERT_TRUE(agent_->expect(kTgtOff, size, seed));
    verify_both();
  }
}

TEST_F(RcOpsTest, RdmaReadAllSizes) {
  uint32_t seed = 4000;
  for (uint32_t size : kSizes) {
    SCOPED_TRACE(testing::Message() << "RDMA_READ size " << size);
    ++seed;
    ASSERT_TRUE(agent_->fill(kTgtOff, size, seed));
    ibv_sge sg = local_.sge(kTgtOff, size);
    ibv_send_wr w = wr(seed, IBV_WR_RDMA_READ, &sg, size ? 1 : 0);
    rdma(&w, agent_->raddr(kTgtOff), agent_->rkey());
    ASSERT_NO_FATAL_FAILURE(run(w, IBV_WC_RDMA_READ));
    local_.mem.expect(kTgtOff, size, seed);
    verify_both();
  }
}

TEST_F(RcOpsTest, AtomicsReturnTheOriginalValueAndUpdateTarget) {
  std::vector<uint8_t> b = agent_->read_bytes(kAtomicOff, 8);
  ASSERT_EQ(b.size(), 8u) << agent_->error();
  uint64_t initial;
  memcpy(&initial, b.data(), 8);
  ibv_sge sg = local_.sge(kResultOff, 8);
  auto atomic = [&](uint64_t id, ibv_wr_opcode op, uint64_t compare_add, uint64_t swap) {
    ibv_send_wr w = wr(id, op, &sg, 1);
    w.wr.atomic.remote_addr = agent_->raddr(kAtomicOff);
    w.wr.atomic.rkey = agent_->rkey();
    w.wr.atomic.compare_add = compare_add;
    w.wr.atomic.swap = swap;
    return w;
  };
  const uint64_t kSwap = 0x1122334455667788ull;

  // CMP_AND_SWP that matches: swaps, returns the original.
  ASSERT_NO_FATAL_FAILURE(run(atomic(1, IBV_WR_ATOMIC_CMP_AND_SWP, initial, kSwap), IBV_WC_COMP_SWAP));
  EXPECT_EQ(local_.mem.u64_at(kResultOff), initial);
  local_.mem.expect_u64(kResultOff, initial);
  ASSERT_TRUE(agent_->expect_u64(kAtomicOff, kSwap));
  verify_both();

  // CMP_AND_SWP that does not match: memory unchanged, returns the current value.
  ASSERT_NO_FATAL_FAILURE(
      run(atomic(2, IBV_WR_ATOMIC_CMP_AND_SWP, initial, 0xdeadbeefull), IBV_WC_COMP_SWAP));
  EXPECT_EQ(local_.mem.u64_at(kResultOff), kSwap);
  local_.mem.expect_u64(kResultOff, kSwap);
  verify_both();

  // FETCH_AND_ADD, then one that wraps around 2^64.
  const uint64_t kAdd = 0x0000010000000001ull;
  ASSERT_NO_FATAL_FAILURE(run(atomic(3, IBV_WR_ATOMIC_FETCH_AND_ADD, kAdd, 0), IBV_WC_FETCH_ADD));
  EXPECT_EQ(local_.mem.u64_at(kResultOff), kSwap);
  local_.mem.expect_u64(kResultOff, kSwap);
  ASSERT_TRUE(agent_->expect_u64(kAtomicOff, kSwap + kAdd));
  verify_both();
  ASSERT_NO_FATAL_FAILURE(run(atomic(4, IBV_WR_ATOMIC_FETCH_AND_ADD, ~0ull, 0), IBV_WC_FETCH_ADD));
  EXPECT_EQ(local_.mem.u64_at(kResultOff), kSwap + kAdd);
  local_.mem.expect_u64(kResultOff, kSwap + kAdd);
  ASSERT_TRUE(agent_->expect_u64(kAtomicOff, kSwap + kAdd - 1));
  verify_both();

  // And an RDMA READ sees what the atomics left.
  ibv_sge rd = local_.sge(kResultOff + 64, 8);
  ibv_send_wr w = wr(5, IBV_WR_RDMA_READ, &rd, 1);
  rdma(&w, agent_->raddr(kAtomicOff), agent_->rkey());
  ASSERT_NO_FATAL_FAILURE(run(w, IBV_WC_RDMA_READ));
  EXPECT_EQ(local_.mem.u64_at(kResultOff + 64), kSwap + kAdd - 1);
  local_.mem.expect_u64(kResultOff + 64, kSwap + kAdd - 1);
  verify_both();
}

TEST_F(RcOpsTest, ThreeSendSgesScatterIntoTwoReceiveSges) {
  // Gather: 1000 + 3000 + 5000 bytes from three separated places.
  const uint32_t seed = 5001;
  const Seg src[3] = {{kSrcOff, 1000}, {kSrcOff + 10000, 3000}, {kSrcOff + 20000, 5000}};
  uint64_t pos = 0;
  for (const Seg& s : src) {
    local_.mem.fill(s.off, s.len, seed, pos);
    pos += s.len;
  }
  ibv_sge sg[3];
  for (int i = 0; i < 3; ++i) sg[i] = local_.sge(src[i].off, src[i].len);
  // Scatter: 4096 bytes, then 8192 of which 4904 get used.
  ASSERT_EQ(agent_->post_recv(77, {{kRecvOff + 7, 4096}, {kRecvOff + 50000, 8192}}), 0);
  ASSERT_NO_FATAL_FAILURE(run(wr(77, IBV_WR_SEND, sg, 3), IBV_WC_SEND));
  ASSERT_NO_FATAL_FAILURE(expect_recv(77, IBV_WC_RECV, 9000, false, 0));
  ASSERT_TRUE(agent_->expect(kRecvOff + 7, 4096, seed, 0));
  ASSERT_TRUE(agent_->expect(kRecvOff + 50000, 9000 - 4096, seed, 4096));
  verify_both();
}

TEST_F(RcOpsTest, MultiSgeWriteWriteWithImmAndRead) {
  const uint32_t seed = 5002;
  const Seg src[3] = {{kSrcOff, 333}, {kSrcOff + 4096, 70000}, {kSrcOff + 80000, 1}};
  uint64_t pos = 0;
  ibv_sge sg[3];
  for (int i = 0; i < 3; ++i) {
    local_.mem.fill(src[i].off, src[i].len, seed, pos);
    sg[i] = local_.sge(src[i].off, src[i].len);
    pos += src[i].len;
  }
  const uint32_t total = uint32_t(pos);

  ibv_send_wr w = wr(1, IBV_WR_RDMA_WRITE, sg, 3);
  rdma(&w, agent_->raddr(kTgtOff), agent_->rkey());
  ASSERT_NO_FATAL_FAILURE(run(w, IBV_WC_RDMA_WRITE));
  ASSERT_TRUE(agent_->expect(kTgtOff, total, seed));
  verify_both();

  ASSERT_EQ(agent_->post_recv(2, {{kRecvOff, 64}}), 0);
  w = wr(2, IBV_WR_RDMA_WRITE_WITH_IMM, sg, 3);
  rdma(&w, agent_->raddr(kTgtOff + 100000), agent_->rkey());
  w.imm_data = imm_be(0x12345678);
  ASSERT_NO_FATAL_FAILURE(run(w, IBV_WC_RDMA_WRITE));
  ASSERT_NO_FATAL_FAILURE(expect_recv(2, IBV_WC_RECV_RDMA_WITH_IMM, total, true, 0x12345678));
  ASSERT_TRUE(agent_->expect(kTgtOff + 100000, total, seed));
  verify_both();

  // READ the first write back, scattered over three local pieces.
  const Seg dst[3] = {{kTgtOff, 40000}, {kTgtOff + 50001, 30000}, {kTgtOff + 90000, total - 70000}};
  ibv_sge rs[3];
  pos = 0;
  for (int i = 0; i < 3; ++i) {
    rs[i] = local_.sge(dst[i].off, dst[i].len);
    local_.mem.expect(dst[i].off, dst[i].len, seed, pos);
    pos += dst[i].len;
  }
  w = wr(3, IBV_WR_RDMA_READ, rs, 3);
  rdma(&w, agent_->raddr(kTgtOff), agent_->rkey());
  ASSERT_NO_FATAL_FAILURE(run(w, IBV_WC_RDMA_READ));
  verify_both();
}

TEST_F(RcOpsTest, InlineDataIsCapturedAtPostTime) {
  ASSERT_GE(local_.cfg.caps.max_inline, 200u);
  // Inline data comes from unregistered memory and its L_Key is not checked
  // (ibv_post_send(3): "The L_Key will not be checked").
  uint8_t stack_buf[200];
  ibv_sge sg{reinterpret_cast<uint64_t>(stack_buf), sizeof(stack_buf), 0xdeadbeef};

  fill_pattern(stack_buf, sizeof(stack_buf), 6001);
  ASSERT_EQ(agent_->post_recv(1, {{kRecvOff, 4096}}), 0);
  ibv_send_wr w = wr(1, IBV_WR_SEND_WITH_IMM, &sg, 1, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
  w.imm_data = imm_be(6001);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(local_.qp.get(), &w, &bad), 0);
  memset(stack_buf, 0xee, sizeof(stack_buf));  // must not change what was sent
  auto wc = poll_one(local_.scq.get());
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << wc_str(*wc);
  ASSERT_NO_FATAL_FAILURE(expect_recv(1, IBV_WC_RECV, sizeof(stack_buf), true, 6001));
  ASSERT_TRUE(agent_->expect(kRecvOff, sizeof(stack_buf), 6001));
  verify_both();

  fill_pattern(stack_buf, sizeof(stack_buf), 6002);
  w = wr(2, IBV_WR_RDMA_WRITE, &sg, 1, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
  rdma(&w, agent_->raddr(kTgtOff), agent_->rkey());
  ASSERT_EQ(ibv_post_send(local_.qp.get(), &w, &bad), 0);
  memset(stack_buf, 0xdd, sizeof(stack_buf));
  wc = poll_one(local_.scq.get());
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << wc_str(*wc);
  ASSERT_TRUE(agent_->expect(kTgtOff, sizeof(stack_buf), 6002));
  verify_both();

  // Inline with two SGEs, one of them empty.
  fill_pattern(stack_buf, sizeof(stack_buf), 6003);
  ibv_sge two[2] = {{reinterpret_cast<uint64_t>(stack_buf), 0, 0}, sg};
  ASSERT_EQ(agent_->post_recv(3, {{kRecvOff, 4096}}), 0);
  w = wr(3, IBV_WR_SEND, two, 2, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
  ASSERT_EQ(ibv_post_send(local_.qp.get(), &w, &bad), 0);
  memset(stack_buf, 0xcc, sizeof(stack_buf));
  wc = poll_one(local_.scq.get());
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << wc_str(*wc);
  ASSERT_NO_FATAL_FAILURE(expect_recv(3, IBV_WC_RECV, sizeof(stack_buf), false, 0));
  ASSERT_TRUE(agent_->expect(kRecvOff, sizeof(stack_buf), 6003));
  verify_both();
}

TEST_F(RcOpsTest, OnlySignaledRequestsComplete) {
  // sq_sig_all = 0: 64 WRITEs, every 8th signaled -> exactly 8 completions.
  // Twice: unsignaled WRs must give their send-queue slots back when a later
  // signaled completion is polled (max_send_wr is 64).
  ASSERT_EQ(local_.cfg.caps.max_send_wr, 64u);
  ASSERT_FALSE(local_.cfg.caps.sq_sig_all);
  constexpr int kN = 64, kEvery = 8;
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(testing::Message() << "round " << round);
    for (int i = 0; i < kN; ++i) {
      const uint32_t seed = 7000 + round * 100 + i;
      const uint64_t off = kSrcOff + uint64_t(i) * 1000;
      local_.mem.fill(off, 999, seed);
      ibv_sge sg = local_.sge(off, 999);
      ibv_send_wr w = wr(uint64_t(round * kN + i), IBV_WR_RDMA_WRITE, &sg, 1,
                         (i % kEvery == kEvery - 1) ? IBV_SEND_SIGNALED : 0);
      rdma(&w, agent_->raddr(kTgtOff + uint64_t(i) * 1000), agent_->rkey());
      ibv_send_wr* bad = nullptr;
      ASSERT_EQ(ibv_post_send(local_.qp.get(), &w, &bad), 0) << "post " << i;
      ASSERT_TRUE(agent_->expect(kTgtOff + uint64_t(i) * 1000, 999, seed));
    }
    std::vector<ibv_wc> wcs = poll_n(local_.scq.get(), kN / kEvery);
    ASSERT_EQ(wcs.size(), size_t(kN / kEvery));
    for (int k = 0; k < kN / kEvery; ++k) {
      EXPECT_EQ(wcs[k].status, IBV_WC_SUCCESS) << wc_str(wcs[k]);
      EXPECT_EQ(wcs[k].wr_id, uint64_t(round * kN + k * kEvery + kEvery - 1)) << wc_str(wcs[k]);
      EXPECT_EQ(wcs[k].opcode, IBV_WC_RDMA_WRITE);
    }
    EXPECT_TRUE(drain_cq(local_.scq.get(), 50).empty()) << "completions for unsignaled WRs";
    verify_both();
  }
}

TEST_F(RcOpsTest, SolicitedAndFencedRequestsAreAccepted) {
  // READ, then a fenced, solicited SEND that carries what the READ fetched
  // (the fence orders it after the READ).
  ASSERT_TRUE(agent_->fill(kTgtOff, 5000, 8001));
  ibv_sge rd = local_.sge(kSrcOff, 5000);
  ibv_send_wr r = wr(1, IBV_WR_RDMA_READ, &rd, 1);
  rdma(&r, agent_->raddr(kTgtOff), agent_->rkey());
  ibv_sge sd = local_.sge(kSrcOff, 5000);
  ibv_send_wr s = wr(2, IBV_WR_SEND, &sd, 1, IBV_SEND_SIGNALED | IBV_SEND_FENCE | IBV_SEND_SOLICITED);
  r.next = &s;
  ASSERT_EQ(agent_->post_recv(9, {{kRecvOff, 8192}}), 0);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(local_.qp.get(), &r, &bad), 0);
  std::vector<ibv_wc> wcs = poll_n(local_.scq.get(), 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS) << wc_str(wcs[0]);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[1].opcode, IBV_WC_SEND);
  EXPECT_EQ(wcs[1].status, IBV_WC_SUCCESS) << wc_str(wcs[1]);
  ASSERT_NO_FATAL_FAILURE(expect_recv(9, IBV_WC_RECV, 5000, false, 0));
  local_.mem.expect(kSrcOff, 5000, 8001);
  ASSERT_TRUE(agent_->expect(kRecvOff, 5000, 8001));
  verify_both();
}

// A SEND that finds no receive posted waits (RNR, rnr_retry 7 = forever) and
// completes once the peer posts one; an inline payload must still be the one
// captured at post time. A WRITE posted behind it must not land first: an RC
// send queue executes in order (IBA 9.5; the responder drops what follows an
// RNR NAK until the SEND is retried).
TEST_F(RcOpsTest, RnrDeferredInlineSendKeepsItsDataAndOrder) {
  uint8_t inl[150];
  fill_pattern(inl, sizeof(inl), 9100);
  ibv_sge isg{reinterpret_cast<uint64_t>(inl), sizeof(inl), 0};
  ibv_send_wr s = wr(1, IBV_WR_SEND, &isg, 1, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
  local_.mem.fill(kSrcOff, 10000, 9101);
  ibv_sge wsg = local_.sge(kSrcOff, 10000);
  ibv_send_wr w = wr(2, IBV_WR_RDMA_WRITE, &wsg, 1);
  rdma(&w, agent_->raddr(kTgtOff), agent_->rkey());
  s.next = &w;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(local_.qp.get(), &s, &bad), 0);
  memset(inl, 0x77, sizeof(inl));

  // No receive yet: nothing may complete, the WRITE must not have landed.
  EXPECT_TRUE(drain_cq(local_.scq.get(), 30).empty()) << "completion before the peer posted a receive";
  EXPECT_EQ(agent_->verify(), "") << "the WRITE overtook the RNR-blocked SEND";

  ASSERT_EQ(agent_->post_recv(5, {{kRecvOff, 4096}}), 0);
  std::vector<ibv_wc> wcs = poll_n(local_.scq.get(), 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS) << wc_str(wcs[0]);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[1].status, IBV_WC_SUCCESS) << wc_str(wcs[1]);
  ASSERT_NO_FATAL_FAILURE(expect_recv(5, IBV_WC_RECV, sizeof(inl), false, 0));
  ASSERT_TRUE(agent_->expect(kRecvOff, sizeof(inl), 9100));
  ASSERT_TRUE(agent_->expect(kTgtOff, 10000, 9101));
  verify_both();
}

// The other direction: the forked process is the requester and this process
// the target. The peer is forked only after this thread has moved data
// itself, so nothing this process cached about itself may leak into the
// child (the child is a different process with the same memory image).
TEST_F(RcOpsTest, ForkedRequesterReachesTheTestProcess) {
  // Move data from this thread first.
  local_.mem.fill(kSrcOff, 64, 9000);
  ibv_sge sg = local_.sge(kSrcOff, 64);
  ibv_send_wr w = wr(1, IBV_WR_RDMA_WRITE, &sg, 1);
  rdma(&w, agent_->raddr(kTgtOff), agent_->rkey());
  ASSERT_NO_FATAL_FAILURE(run(w, IBV_WC_RDMA_WRITE));
  ASSERT_TRUE(agent_->expect(kTgtOff, 64, 9000));
  verify_both();

  // Now a second pair, forked after that.
  EndConfig cfg;
  cfg.bg_seed = 300;
  std::string err;
  LocalEnd local2;
  ASSERT_TRUE(local2.open(cfg, &err)) << err;
  cfg.bg_seed = 400;
  auto agent2 = Agent::start(cfg, &err);
  ASSERT_TRUE(agent2) << err;
  ASSERT_TRUE(agent2->connect(local2.info())) << agent2->error();
  ASSERT_TRUE(local2.connect(agent2->info(), &err)) << err;

  auto agent_op = [&](AgentSend s, ibv_wc_opcode op) {
    ASSERT_EQ(agent2->post_send(s), 0) << agent2->error();
    ibv_wc wc;
    ASSERT_EQ(agent2->poll_send(&wc), 1) << agent2->error();
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
    EXPECT_EQ(wc.opcode, op) << wc_str(wc);
    EXPECT_EQ(wc.wr_id, s.wr_id) << wc_str(wc);
  };

  // WRITE into us.
  ASSERT_TRUE(agent2->fill(kSrcOff, 70000, 9001));
  AgentSend s;
  s.wr_id = 11;
  s.opcode = IBV_WR_RDMA_WRITE;
  s.sges = {{kSrcOff, 70000}};
  s.remote_addr = local2.mem.addr(kTgtOff);
  s.rkey = local2.mr->rkey;
  ASSERT_NO_FATAL_FAILURE(agent_op(s, IBV_WC_RDMA_WRITE));
  local2.mem.expect(kTgtOff, 70000, 9001);
  EXPECT_EQ(local2.mem.verify(), "");

  // SEND to us.
  ASSERT_TRUE(agent2->fill(kSrcOff, 5000, 9002));
  ASSERT_EQ(local2.post_recv(12, {local2.sge(kRecvOff, 8192)}), 0);
  s.wr_id = 12;
  s.opcode = IBV_WR_SEND;
  s.sges = {{kSrcOff, 5000}};
  ASSERT_NO_FATAL_FAILURE(agent_op(s, IBV_WC_SEND));
  auto wc = poll_one(local2.rcq.get());
  ASSERT_TRUE(wc) << "no receive completion";
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << wc_str(*wc);
  EXPECT_EQ(wc->byte_len, 5000u) << wc_str(*wc);
  local2.mem.expect(kRecvOff, 5000, 9002);
  EXPECT_EQ(local2.mem.verify(), "");

  // READ from us.
  local2.mem.fill(kTgtOff + kMiB, 4096, 9003);
  s.wr_id = 13;
  s.opcode = IBV_WR_RDMA_READ;
  s.sges = {{kTgtOff, 4096}};
  s.remote_addr = local2.mem.addr(kTgtOff + kMiB);
  ASSERT_NO_FATAL_FAILURE(agent_op(s, IBV_WC_RDMA_READ));
  ASSERT_TRUE(agent2->expect(kTgtOff, 4096, 9003));
  EXPECT_EQ(agent2->verify(), "");

  // FETCH_AND_ADD on us.
  const uint64_t before = local2.mem.u64_at(kAtomicOff);
  s.wr_id = 14;
  s.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  s.sges = {{kResultOff, 8}};
  s.remote_addr = local2.mem.addr(kAtomicOff);
  s.compare_add = 5;
  ASSERT_NO_FATAL_FAILURE(agent_op(s, IBV_WC_FETCH_ADD));
  local2.mem.expect_u64(kAtomicOff, before + 5);
  EXPECT_EQ(local2.mem.verify(), "");
  ASSERT_TRUE(agent2->expect_u64(kResultOff, before));
  EXPECT_EQ(agent2->verify(), "");
}

}  // namespace
}  // namespace uroce::test
