// A target process that is SIGSTOPped while one-sided operations run against
// it. A real RNIC executes RDMA WRITE/READ/ATOMIC (and places SENDs into
// posted receives) without the target CPU; uroce's initiator does the same on
// the target's memory. So every operation must complete while the target is
// stopped, READs must see the WRITEs and atomics, and after SIGCONT the
// target itself must find exactly the expected bytes in its memory (checked
// in the target process, reported over the socketpair).
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>

#include "support/verbs_harness.h"

namespace uroce::test {
namespace {

constexpr uint64_t kMiB = 1u << 20;
constexpr uint64_t kWriteOff = kMiB + 7;
constexpr uint32_t kWriteLen = 300000;
constexpr uint64_t kUntouchedOff = 2 * kMiB;  // READ of memory nobody wrote
constexpr uint64_t kWordOff = 3 * kMiB;       // atomics
constexpr uint64_t kImmTgtOff = 3 * kMiB + 4096;
constexpr uint64_t kRecvOff = 0;

TEST(StoppedTargetTest, OneSidedOpsAndSendsCompleteWhileTheTargetIsStopped) {
  EndConfig cfg;
  cfg.bg_seed = 10;
  std::string err;
  LocalEnd local;
  ASSERT_TRUE(local.open(cfg, &err)) << err;
  cfg.bg_seed = 20;
  auto target = Agent::start(cfg, &err);
  ASSERT_TRUE(target) << err;
  ASSERT_TRUE(target->connect(local.info())) << target->error();
  ASSERT_TRUE(local.connect(target->info(), &err)) << err;

  // Receives for the SEND and the WRITE_WITH_IMM, posted before the stop.
  ASSERT_EQ(target->post_recv(1, {{kRecvOff, 8192}}), 0);
  ASSERT_EQ(target->post_recv(2, {{kRecvOff + 8192, 64}}), 0);
  std::vector<uint8_t> w0 = target->read_bytes(kWordOff, 8);
  ASSERT_EQ(w0.size(), 8u) << target->error();
  uint64_t word0;
  memcpy(&word0, w0.data(), 8);

  ASSERT_TRUE(target->proc().stop()) << "could not SIGSTOP the target";

  uint64_t id = 0;
  auto run = [&](ibv_wr_opcode op, ibv_sge* sg, int n, uint64_t raddr, uint32_t imm = 0) {
    ibv_send_wr w;
    memset(&w, 0, sizeof(w));
    w.wr_id = ++id;
    w.opcode = op;
    w.sg_list = sg;
    w.num_sge = n;
    w.send_flags = IBV_SEND_SIGNALED;
    w.imm_data = imm;
    w.wr.rdma.remote_addr = raddr;
    w.wr.rdma.rkey = target->rkey();
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(local.qp.get(), &w, &bad), 0);
    auto wc = poll_one(local.scq.get());
    ASSERT_TRUE(wc) << "no completion for wr " << id << " while the target is stopped";
    EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << wc_str(*wc);
    EXPECT_EQ(wc->wr_id, id);
  };
  auto atomic = [&](ibv_wr_opcode op, uint64_t cmp_add, uint64_t swap, uint64_t res_off) {
    ibv_sge sg = local.sge(res_off, 8);
    ibv_send_wr w;
    memset(&w, 0, sizeof(w));
    w.wr_id = ++id;
    w.opcode = op;
    w.sg_list = &sg;
    w.num_sge = 1;
    w.send_flags = IBV_SEND_SIGNALED;
    w.wr.atomic.remote_addr = target->raddr(kWordOff);
    w.wr.atomic.rkey = target->rkey();
    w.wr.atomic.compare_add = cmp_add;
    w.wr.atomic.swap = swap;
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(local.qp.get(), &w, &bad), 0);
    auto wc = poll_one(local.scq.get());
    ASSERT_TRUE(wc) << "no completion for atomic " << id << " while the target is stopped";
    EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << wc_str(*wc);
  };

  // WRITE, then READ it back into a different local place.
  local.mem.fill(0, kWriteLen, 31);
  ibv_sge sg = local.sge(0, kWriteLen);
  ASSERT_NO_FATAL_FAILURE(run(IBV_WR_RDMA_WRITE, &sg, 1, target->raddr(kWriteOff)));
  ibv_sge back = local.sge(kMiB, kWriteLen);
  ASSERT_NO_FATAL_FAILURE(run(IBV_WR_RDMA_READ, &back, 1, target->raddr(kWriteOff)));
  local.mem.expect(kMiB, kWriteLen, 31);
  // READ memory only the target initialised (its background pattern).
  ibv_sge untouched = local.sge(2 * kMiB, 65536);
  ASSERT_NO_FATAL_FAILURE(run(IBV_WR_RDMA_READ, &untouched, 1, target->raddr(kUntouchedOff)));
  local.mem.expect(2 * kMiB, 65536, 20, kUntouchedOff);

  // Atomics: a successful CMP_AND_SWP, a failing one, a FETCH_AND_ADD; READ back.
  const uint64_t kSwap = 0x0123456789abcdefull;
  ASSERT_NO_FATAL_FAILURE(atomic(IBV_WR_ATOMIC_CMP_AND_SWP, word0, kSwap, 3 * kMiB));
  ASSERT_NO_FATAL_FAILURE(atomic(IBV_WR_ATOMIC_CMP_AND_SWP, word0, 1, 3 * kMiB + 8));
  ASSERT_NO_FATAL_FAILURE(atomic(IBV_WR_ATOMIC_FETCH_AND_ADD, 1000, 0, 3 * kMiB + 16));
  EXPECT_EQ(local.mem.u64_at(3 * kMiB), word0);
  EXPECT_EQ(local.mem.u64_at(3 * kMiB + 8), kSwap);
  EXPECT_EQ(local.mem.u64_at(3 * kMiB + 16), kSwap);
  local.mem.expect_u64(3 * kMiB, word0);
  local.mem.expect_u64(3 * kMiB + 8, kSwap);
  local.mem.expect_u64(3 * kMiB + 16, kSwap);
  ibv_sge wordback = local.sge(3 * kMiB + 24, 8);
  ASSERT_NO_FATAL_FAILURE(run(IBV_WR_RDMA_READ, &wordback, 1, target->raddr(kWordOff)));
  EXPECT_EQ(local.mem.u64_at(3 * kMiB + 24), kSwap + 1000);
  local.mem.expect_u64(3 * kMiB + 24, kSwap + 1000);

  // A SEND and a WRITE_WITH_IMM into the receives posted before the stop.
  local.mem.fill(3 * kMiB + 4096, 5000, 32);
  ibv_sge snd = local.sge(3 * kMiB + 4096, 5000);
  ASSERT_NO_FATAL_FAILURE(run(IBV_WR_SEND, &snd, 1, 0));
  local.mem.fill(3 * kMiB + 16384, 777, 33);
  ibv_sge wimm = local.sge(3 * kMiB + 16384, 777);
  ASSERT_NO_FATAL_FAILURE(
      run(IBV_WR_RDMA_WRITE_WITH_IMM, &wimm, 1, target->raddr(kImmTgtOff), imm_be(0xfeed)));

  EXPECT_EQ(local.mem.verify(), "") << "local memory";
  // All of that happened without the target running.
  EXPECT_TRUE(target->proc().is_stopped());
  ASSERT_TRUE(target->proc().cont());

  // The target, running again, checks its own memory and completions.
  ibv_wc wc;
  ASSERT_EQ(target->poll_recv(&wc), 1) << target->error();
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.byte_len, 5000u);
  ASSERT_EQ(target->poll_recv(&wc), 1) << target->error();
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(wc.byte_len, 777u);
  EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(wc.imm_data), 0xfeedu);
  ASSERT_TRUE(target->expect(kWriteOff, kWriteLen, 31));
  ASSERT_TRUE(target->expect_u64(kWordOff, kSwap + 1000));
  ASSERT_TRUE(target->expect(kRecvOff, 5000, 32));
  ASSERT_TRUE(target->expect(kImmTgtOff, 777, 33));
  EXPECT_EQ(target->verify(), "");
}

}  // namespace
}  // namespace uroce::test
