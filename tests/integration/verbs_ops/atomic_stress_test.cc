// RDMA atomics are atomic against each other (IBV_ATOMIC_HCA): two processes
// with two threads each run 20000 FETCH_AND_ADDs apiece on one 64-bit word
// in a third process (this one). Each thread adds into its own 16-bit lane
// of the word, so a lost update shows which thread lost it, and the value
// each FETCH_AND_ADD returns must show exactly that thread's earlier adds in
// its lane (one QP executes its requests in order).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "support/verbs_harness.h"

namespace uroce::test {
namespace {

constexpr int kProcs = 2;
constexpr int kThreads = 2;
constexpr uint32_t kOps = 20000;
constexpr uint32_t kWindow = 16;     // outstanding atomics per thread
constexpr uint64_t kWordOff = 2048;  // in this process's buffer
constexpr int kRunMs = 40000;        // bound for the whole run

uint64_t lane_add(int lane) { return 1ull << (16 * lane); }
uint64_t lane_of(uint64_t v, int lane) { return (v >> (16 * lane)) & 0xffff; }

struct ThreadResult {
  int32_t ok = 0;
  uint32_t completed = 0;
  char msg[200] = {};
};
struct ProcResult {
  ThreadResult t[kThreads];
};

/// One initiator thread: kOps FETCH_AND_ADDs with up to kWindow in flight,
/// each returning its original value into its own 8-byte result slot.
void run_thread(LocalEnd& e, const WireInfo& target, int lane, ThreadResult* out) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kRunMs);
  uint32_t posted = 0, done = 0;
  auto fail = [&](const std::string& m) {
    snprintf(out->msg, sizeof(out->msg), "lane %d: %s", lane, m.c_str());
  };
  while (done < kOps) {
    while (posted < kOps && posted - done < kWindow) {
      ibv_sge sg = e.sge(uint64_t(posted) * 8, 8);
      ibv_send_wr wr;
      memset(&wr, 0, sizeof(wr));
      wr.wr_id = posted;
      wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
      wr.sg_list = &sg;
      wr.num_sge = 1;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.wr.atomic.remote_addr = target.addr + kWordOff;
      wr.wr.atomic.rkey = target.rkey;
      wr.wr.atomic.compare_add = lane_add(lane);
      ibv_send_wr* bad = nullptr;
      if (int rc = ibv_post_send(e.qp.get(), &wr, &bad))
        return fail("ibv_post_send: " + std::string(strerror(rc)));
      ++posted;
    }
    ibv_wc wc[kWindow];
    int n = ibv_poll_cq(e.scq.get(), int(kWindow), wc);
    if (n < 0) return fail("ibv_poll_cq failed");
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id != done)
        return fail("bad completion " + wc_str(wc[i]));
      ++done;
    }
    if (n == 0 && std::chrono::steady_clock::now() > deadline) {
      return fail("timed out after " + std::to_string(done) + " completions");
    }
  }
  out->completed = done;
  for (uint32_t i = 0; i < kOps; ++i) {
    const uint64_t orig = e.mem.u64_at(uint64_t(i) * 8);
    if (lane_of(orig, lane) != i) {
      return fail("op " + std::to_string(i) + " returned " + std::to_string(lane_of(orig, lane)) +
                  " in its own lane");
    }
  }
  out->ok = 1;
}

/// An initiator process: one context and QP per thread (opened after fork).
int initiator_main(Channel& ch, int proc) {
  LocalEnd ends[kThreads];
  std::string err;
  for (int t = 0; t < kThreads; ++t) {
    EndConfig cfg;
    cfg.buf_bytes = 256u << 10;
    cfg.caps.max_send_wr = kWindow;
    cfg.cqe = int(kWindow) * 2;
    cfg.bg_seed = 500 + uint32_t(proc * kThreads + t);
    if (!ends[t].open(cfg, &err)) child_fail(__FILE__, __LINE__, err);
    CHILD_CHECK(ch.send_pod(ends[t].info()), "send info: " + ch.error());
  }
  WireInfo target[kThreads];
  for (int t = 0; t < kThreads; ++t) {
    CHILD_CHECK(ch.recv_pod(&target[t]), "recv target: " + ch.error());
    CHILD_CHECK(ends[t].connect(target[t], &err), err);
  }
  int32_t ready = 0;
  CHILD_CHECK(ch.send_pod(ready), "send ready");
  int32_t go = 0;
  CHILD_CHECK(ch.recv_pod(&go), "recv go: " + ch.error());
  ProcResult res;
  std::thread th[kThreads];
  for (int t = 0; t < kThreads; ++t)
    th[t] = std::thread(run_thread, std::ref(ends[t]), std::cref(target[t]), proc * kThreads + t, &res.t[t]);
  for (auto& x : th) x.join();
  CHILD_CHECK(ch.send_pod(res), "send result");
  return 0;
}

TEST(AtomicStressTest, FetchAndAddFromFourThreadsInTwoProcessesIsExact) {
  Device dev;
  std::string err;
  ASSERT_TRUE(open_device(&dev, &err)) << err;
  CqPtr cq(ibv_create_cq(dev.ctx.get(), 16, nullptr, nullptr, 0));
  ASSERT_TRUE(cq);
  ShadowedMemory mem;
  ASSERT_TRUE(mem.allocate(4096));
  mem.fill(0, mem.size(), 9);
  const uint64_t zero = 0;
  memcpy(mem.data() + kWordOff, &zero, 8);
  mem.expect_u64(kWordOff, 0);
  MrPtr mr(ibv_reg_mr(dev.pd.get(), mem.data(), mem.size(), kRemoteAccess));
  ASSERT_TRUE(mr);

  std::unique_ptr<PeerProcess> proc[kProcs];
  QpPtr qps[kProcs][kThreads];
  for (int p = 0; p < kProcs; ++p) {
    proc[p] = PeerProcess::spawn([p](Channel& ch) { return initiator_main(ch, p); });
    ASSERT_TRUE(proc[p]);
  }
  for (int p = 0; p < kProcs; ++p) {
    for (int t = 0; t < kThreads; ++t) {
      WireInfo theirs;
      ASSERT_TRUE(proc[p]->chan().recv_pod(&theirs)) << proc[p]->chan().error();
      qps[p][t].reset(create_qp(dev.pd.get(), IBV_QPT_RC, cq.get(), cq.get(), nullptr, QpCaps{}));
      ASSERT_TRUE(qps[p][t]);
      ASSERT_TRUE(connect_qp(qps[p][t].get(), IBV_QPT_RC, theirs, 0, &err)) << err;
      WireInfo mine;
      mine.qpn = qps[p][t]->qp_num;
      mine.addr = mem.addr();
      mine.rkey = mr->rkey;
      mine.len = mem.size();
      memcpy(mine.gid, dev.gid.raw, 16);
      ASSERT_TRUE(proc[p]->chan().send_pod(mine));
    }
  }
  for (int p = 0; p < kProcs; ++p) {
    int32_t ready = -1;
    ASSERT_TRUE(proc[p]->chan().recv_pod(&ready)) << proc[p]->chan().error();
    ASSERT_EQ(ready, 0);
  }
  for (int p = 0; p < kProcs; ++p) ASSERT_TRUE(proc[p]->chan().send_pod(int32_t(1)));

  for (int p = 0; p < kProcs; ++p) {
    ProcResult r;
    ASSERT_TRUE(proc[p]->chan().recv_pod(&r, kRunMs + kWaitMs))
        << "process " << p << ": " << proc[p]->chan().error();
    for (int t = 0; t < kThreads; ++t) {
      EXPECT_TRUE(r.t[t].ok) << "process " << p << " thread " << t << ": " << r.t[t].msg;
      EXPECT_EQ(r.t[t].completed, kOps);
    }
    EXPECT_EQ(proc[p]->wait_exit(), 0);
  }
  const uint64_t v = mem.u64_at(kWordOff);
  for (int lane = 0; lane < kProcs * kThreads; ++lane) EXPECT_EQ(lane_of(v, lane), kOps) << "lane " << lane;
  uint64_t expected = 0;
  for (int lane = 0; lane < kProcs * kThreads; ++lane) expected += kOps * lane_add(lane);
  mem.expect_u64(kWordOff, expected);
  EXPECT_EQ(mem.verify(), "");
}

}  // namespace
}  // namespace uroce::test
