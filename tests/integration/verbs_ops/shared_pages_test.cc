// Shared pages across processes (memory/mr_backing.h, memory/peer_pages.h):
//  - a region that starts and ends in the middle of pages: its whole pages
//    are reached by memcpy, its edge pages by process_vm_*; every byte must
//    land, and none outside the region;
//  - the initiator maps the target's pages while the region lives and lets
//    them go (so the target's memory is not pinned) once the target
//    deregisters the region, or dies.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "support/verbs_harness.h"

namespace uroce::test {
namespace {

constexpr size_t kBuf = 1u << 20;
constexpr uint64_t kHead = 100;  // the region skips this many bytes at the front
constexpr uint64_t kTail = 50;   // and this many at the back
constexpr uint32_t kTargetSeed = 7, kWriteSeed = 8;

enum Cmd : uint32_t { kVerify = 1, kDereg = 2, kExit = 3 };

/// Bytes of memfd "uroce-mr" mappings in this process outside [skip, skip+n).
uint64_t foreign_shared_bytes(uint64_t skip, uint64_t n) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  uint64_t total = 0;
  while (std::getline(maps, line)) {
    if (line.find("memfd:uroce-mr") == std::string::npos) continue;
    unsigned long long s = 0, e = 0;
    if (sscanf(line.c_str(), "%llx-%llx", &s, &e) != 2) continue;
    if (s >= skip && e <= skip + n) continue;  // our own registered buffer
    total += e - s;
  }
  return total;
}

/// Waits (bounded) until no foreign shared mapping is left.
bool foreign_mappings_go(uint64_t skip, uint64_t n) {
  for (int i = 0; i < 100; ++i) {
    if (foreign_shared_bytes(skip, n) == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

/// The target: a QP and a region [kHead, kBuf - kTail) of its buffer.
int target_main(Channel& ch) {
  EndConfig cfg;
  cfg.buf_bytes = kBuf;
  cfg.bg_seed = kTargetSeed;
  std::string err;
  LocalEnd e;
  CHILD_CHECK(e.open(cfg, &err), err);
  MrPtr mr(ibv_reg_mr(e.dev.pd.get(), e.mem.data() + kHead, kBuf - kHead - kTail, kRemoteAccess));
  CHILD_CHECK(mr != nullptr, "ibv_reg_mr");
  WireInfo me = e.info();
  me.rkey = mr->rkey;
  me.addr = e.mem.addr(kHead);
  me.len = kBuf - kHead - kTail;
  WireInfo peer;
  CHILD_CHECK(ch.recv_pod(&peer), ch.error());
  CHILD_CHECK(e.connect(peer, &err), err);
  CHILD_CHECK(ch.send_pod(me), "send info");
  for (;;) {
    uint32_t cmd = 0;
    CHILD_CHECK(ch.recv_pod(&cmd), ch.error());
    if (cmd == kExit) return 0;
    if (cmd == kDereg) mr.reset();
    if (cmd == kVerify) {
      // The region holds the initiator's pattern; the bytes around it are untouched.
      e.mem.expect(kHead, kBuf - kHead - kTail, kWriteSeed);
    }
    std::string v = cmd == kVerify ? e.mem.verify() : "";
    uint32_t len = uint32_t(std::min<size_t>(v.size(), 200));
    CHILD_CHECK(ch.send_pod(len), "reply");
    if (len) CHILD_CHECK(ch.send(v.data(), len), "reply text");
  }
}

class SharedPagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EndConfig cfg;
    cfg.buf_bytes = kBuf;
    cfg.bg_seed = 1;
    std::string err;
    ASSERT_TRUE(local_.open(cfg, &err)) << err;
    target_ = PeerProcess::spawn(target_main);
    ASSERT_TRUE(target_);
    ASSERT_TRUE(target_->chan().send_pod(local_.info()));
    ASSERT_TRUE(target_->chan().recv_pod(&remote_)) << target_->chan().error();
    ASSERT_TRUE(local_.connect(remote_, &err)) << err;
  }

  /// Sends a command; returns the target's answer ("" = fine).
  std::string ask(uint32_t cmd) {
    uint32_t len = 0;
    if (!target_->chan().send_pod(cmd) || !target_->chan().recv_pod(&len))
      return "no answer: " + target_->chan().error();
    std::string s(len, '\0');
    if (len && !target_->chan().recv(s.data(), len)) return "no answer text";
    return s;
  }

  /// One signaled RDMA WRITE or READ of local [loff, loff+len) at remote `raddr`.
  ibv_wc rdma(ibv_wr_opcode op, uint64_t loff, uint32_t len, uint64_t raddr) {
    ibv_sge sg = local_.sge(loff, len);
    ibv_send_wr w;
    memset(&w, 0, sizeof(w));
    w.wr_id = ++id_;
    w.opcode = op;
    w.sg_list = &sg;
    w.num_sge = 1;
    w.send_flags = IBV_SEND_SIGNALED;
    w.wr.rdma.remote_addr = raddr;
    w.wr.rdma.rkey = remote_.rkey;
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(local_.qp.get(), &w, &bad), 0);
    auto wc = poll_one(local_.scq.get());
    EXPECT_TRUE(wc.has_value());
    return wc.value_or(ibv_wc{});
  }

  LocalEnd local_;
  std::unique_ptr<PeerProcess> target_;
  WireInfo remote_;
  uint64_t id_ = 0;
};

TEST_F(SharedPagesTest, ARegionWithPartialPagesGetsEveryByteAndNoneOutside) {
  const uint32_t len = uint32_t(remote_.len);
  local_.mem.fill(0, len, kWriteSeed);
  // Pieces: the partial head page, whole pages, the partial tail page, and all at once.
  const uint64_t pg = uint64_t(sysconf(_SC_PAGESIZE));
  const uint64_t head = pg - kHead;  // region bytes in the first page
  struct Piece {
    uint64_t off;
    uint32_t len;
  } pieces[] = {
      {0, uint32_t(head)}, {head, uint32_t(8 * pg)}, {head + 8 * pg, len - uint32_t(head + 8 * pg)}};
  for (const Piece& p : pieces) {
    ibv_wc wc = rdma(IBV_WR_RDMA_WRITE, p.off, p.len, remote_.addr + p.off);
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
  }
  EXPECT_EQ(ask(kVerify), "");
  // READ it all back into a buffer region that held something else.
  local_.mem.fill(0, len, 99);
  ibv_wc wc = rdma(IBV_WR_RDMA_READ, 0, len, remote_.addr);
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
  local_.mem.expect(0, len, kWriteSeed);
  EXPECT_EQ(local_.mem.verify(), "");
  ASSERT_TRUE(target_->chan().send_pod(uint32_t(kExit)));
  EXPECT_EQ(target_->wait_exit(), 0);
}

TEST_F(SharedPagesTest, TheInitiatorLetsGoOfPagesOnceTheRegionIsDeregistered) {
  local_.mem.fill(0, 4096, kWriteSeed);
  ibv_wc wc = rdma(IBV_WR_RDMA_WRITE, 0, 4096, remote_.addr + 4096);
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
  const uint64_t mine = local_.mem.addr();
  EXPECT_GT(foreign_shared_bytes(mine, kBuf), 0u) << "the target's pages were not mapped here";
  EXPECT_EQ(ask(kDereg), "");
  EXPECT_TRUE(foreign_mappings_go(mine, kBuf)) << "still mapped 5 s after ibv_dereg_mr";
  wc = rdma(IBV_WR_RDMA_WRITE, 0, 4096, remote_.addr + 4096);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << wc_str(wc);
}

TEST_F(SharedPagesTest, TheInitiatorLetsGoOfPagesOnceTheTargetDies) {
  local_.mem.fill(0, 4096, kWriteSeed);
  ibv_wc wc = rdma(IBV_WR_RDMA_WRITE, 0, 4096, remote_.addr);
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
  const uint64_t mine = local_.mem.addr();
  EXPECT_GT(foreign_shared_bytes(mine, kBuf), 0u);
  target_->kill_and_reap();
  EXPECT_TRUE(foreign_mappings_go(mine, kBuf)) << "still mapped 5 s after the target died";
}

}  // namespace
}  // namespace uroce::test
