// 8 process pairs (16 processes) on one device at once. Each pair runs an RC
// ping-pong for kIters rounds; in each round each side first RDMA WRITEs a
// block into the other's memory and then SENDs a message that names the
// round. RC orders the WRITE before the SEND, so when a message arrives its
// block must already be in place: the receiver checks the message and the
// block byte for byte, and at the end every byte of every buffer is compared
// with what it must hold (ShadowedMemory), which also catches stray writes
// from the 14 other processes. All pairs start together and run concurrently.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

#include "support/verbs_harness.h"

namespace uroce::test {
namespace {

constexpr int kPairs = 8;
constexpr uint32_t kIters = 5000;
constexpr int kRunMs = 50000;  // bound for one pair's whole run (children die at 60 s)

// Buffer layout, both sides of every pair.
constexpr uint64_t kRecvOff = 0;  // the one posted receive
constexpr uint32_t kRecvBytes = 4096;
constexpr uint64_t kSendSrcOff = 8192;     // what this side SENDs
constexpr uint64_t kWriteSrcOff = 16384;   // what this side WRITEs
constexpr uint64_t kWriteAreaOff = 65536;  // where the peer WRITEs into us
constexpr uint32_t kWriteSlots = 16;       // rotating 4 KiB slots
constexpr uint64_t kWriteSlotBytes = 4096;
constexpr size_t kBufBytes = kWriteAreaOff + kWriteSlots * kWriteSlotBytes;

/// Header at the start of every SEND; the rest is pattern bytes.
struct Msg {
  uint32_t pair;
  uint32_t role;  // of the sender
  uint32_t iter;
  uint32_t write_len;
};

// Sizes and contents are functions of (pair, role, iteration), so the
// receiver knows what must have arrived.
uint32_t send_len(int pair, int role, uint32_t i) {
  return uint32_t(sizeof(Msg)) +
         (i * 53 + uint32_t(pair) * 7 + uint32_t(role) * 3) % (kRecvBytes - sizeof(Msg));
}
uint32_t write_len(int pair, int role, uint32_t i) {
  return 1 + (i * 131 + uint32_t(pair) * 17 + uint32_t(role) * 5) % uint32_t(kWriteSlotBytes);
}
uint32_t send_seed(int pair, int role, uint32_t i) { return (uint32_t(pair * 2 + role) << 24) | (i << 1); }
uint32_t write_seed(int pair, int role, uint32_t i) { return send_seed(pair, role, i) | 1; }
uint64_t write_slot_off(uint32_t i) { return kWriteAreaOff + uint64_t(i % kWriteSlots) * kWriteSlotBytes; }

struct Result {
  int32_t ok = 0;
  uint32_t iters = 0;
  char msg[240] = {};
};

/// One side of one pair: after the handshake, kIters rounds; role 0 sends
/// first in each round, role 1 answers.
class PairSide {
 public:
  PairSide(int pair, int role) : pair_(pair), role_(role) {}

  int main(Channel& ch) {
    EndConfig cfg;
    cfg.buf_bytes = kBufBytes;
    cfg.caps.max_send_wr = 4;
    cfg.caps.max_recv_wr = 2;
    cfg.caps.max_sge = 1;
    cfg.cqe = 8;
    cfg.bg_seed = 0xbb000000u | uint32_t(pair_ * 2 + role_);
    std::string err;
    if (!e_.open(cfg, &err)) child_fail(__FILE__, __LINE__, err);
    CHILD_CHECK(ch.send_pod(e_.info()), "send info: " + ch.error());
    WireInfo peer;
    CHILD_CHECK(ch.recv_pod(&peer), "recv peer info: " + ch.error());
    CHILD_CHECK(e_.connect(peer, &err), err);
    peer_ = peer;
    CHILD_CHECK(post_recv(), "first ibv_post_recv");
    CHILD_CHECK(ch.send_pod(int32_t(1)), "send ready");
    int32_t go = 0;
    CHILD_CHECK(ch.recv_pod(&go), "recv go: " + ch.error());

    Result r;
    std::string e = run(&r.iters);
    if (e.empty()) e = e_.mem.verify();
    r.ok = e.empty();
    snprintf(r.msg, sizeof(r.msg), "pair %d role %d: %s", pair_, role_, e.c_str());
    CHILD_CHECK(ch.send_pod(r), "send result");
    // Stay until the peer has finished too: its last completion must not
    // race with this QP's destruction.
    int32_t bye = 0;
    CHILD_CHECK(ch.recv_pod(&bye, kRunMs), "recv bye: " + ch.error());
    return 0;
  }

 private:
  std::string run(uint32_t* done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kRunMs);
    for (uint32_t i = 0; i < kIters; ++i) {
      if (std::chrono::steady_clock::now() > deadline) return "ran out of time";
      std::string e;
      if (role_ == 0) {
        e = send_round(i);
        if (e.empty()) e = receive_round(i);
      } else {
        e = receive_round(i);
        if (e.empty()) e = send_round(i);
      }
      if (!e.empty()) return "round " + std::to_string(i) + ": " + e;
      *done = i + 1;
    }
    return "";
  }

  bool post_recv() { return e_.post_recv(0, {e_.sge(kRecvOff, kRecvBytes)}) == 0; }

  /// RDMA WRITE into the peer's write slot, then a SEND naming it.
  std::string send_round(uint32_t i) {
    const uint32_t wlen = write_len(pair_, role_, i);
    e_.mem.fill(kWriteSrcOff, wlen, write_seed(pair_, role_, i));
    const uint32_t slen = send_len(pair_, role_, i);
    Msg m{uint32_t(pair_), uint32_t(role_), i, wlen};
    e_.mem.fill(kSendSrcOff + sizeof(m), slen - sizeof(m), send_seed(pair_, role_, i), sizeof(m));
    memcpy(e_.mem.data() + kSendSrcOff, &m, sizeof(m));
    e_.mem.accept(kSendSrcOff, sizeof(m));

    ibv_sge wsg = e_.sge(kWriteSrcOff, wlen);
    ibv_sge ssg = e_.sge(kSendSrcOff, slen);
    ibv_send_wr wr[2];
    memset(wr, 0, sizeof(wr));
    wr[0].wr_id = 2 * uint64_t(i);
    wr[0].opcode = IBV_WR_RDMA_WRITE;
    wr[0].sg_list = &wsg;
    wr[0].num_sge = 1;
    wr[0].send_flags = IBV_SEND_SIGNALED;
    wr[0].wr.rdma.remote_addr = peer_.addr + write_slot_off(i);
    wr[0].wr.rdma.rkey = peer_.rkey;
    wr[0].next = &wr[1];
    wr[1].wr_id = 2 * uint64_t(i) + 1;
    wr[1].opcode = IBV_WR_SEND;
    wr[1].sg_list = &ssg;
    wr[1].num_sge = 1;
    wr[1].send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(e_.qp.get(), &wr[0], &bad))
      return std::string("ibv_post_send: ") + strerror(rc);
    std::vector<ibv_wc> wcs = poll_n(e_.scq.get(), 2);
    if (wcs.size() != 2) return "send completions: got " + std::to_string(wcs.size()) + " of 2";
    for (int k = 0; k < 2; ++k) {
      const ibv_wc_opcode op = k == 0 ? IBV_WC_RDMA_WRITE : IBV_WC_SEND;
      if (wcs[k].status != IBV_WC_SUCCESS || wcs[k].wr_id != wr[k].wr_id || wcs[k].opcode != op)
        return "send completion " + wc_str(wcs[k]);
    }
    return "";
  }

  /// The peer's round-i message, and the block its WRITE put here first.
  std::string receive_round(uint32_t i) {
    auto wc = poll_one(e_.rcq.get());
    if (!wc) return "no message from the peer";
    const int from = 1 - role_;
    const uint32_t slen = send_len(pair_, from, i);
    if (wc->status != IBV_WC_SUCCESS || wc->opcode != IBV_WC_RECV || wc->byte_len != slen ||
        wc->qp_num != e_.qp->qp_num)
      return "receive " + wc_str(*wc) + ", expected " + std::to_string(slen) + " bytes";
    Msg m;
    memcpy(&m, e_.mem.data() + kRecvOff, sizeof(m));
    const uint32_t wlen = write_len(pair_, from, i);
    if (m.pair != uint32_t(pair_) || m.role != uint32_t(from) || m.iter != i || m.write_len != wlen) {
      return "header {pair " + std::to_string(m.pair) + ", role " + std::to_string(m.role) + ", iter " +
             std::to_string(m.iter) + ", write_len " + std::to_string(m.write_len) + "}";
    }
    if (int64_t at = find_pattern_mismatch(e_.mem.data() + kRecvOff + sizeof(m), slen - sizeof(m),
                                           send_seed(pair_, from, i), sizeof(m));
        at >= 0)
      return "message payload differs at byte " + std::to_string(at + int64_t(sizeof(m)));
    const uint64_t woff = write_slot_off(i);
    if (int64_t at = find_pattern_mismatch(e_.mem.data() + woff, wlen, write_seed(pair_, from, i)); at >= 0)
      return "RDMA WRITE block differs at byte " + std::to_string(at) + " of " + std::to_string(wlen) +
             " (wrong data, or the SEND overtook its WRITE)";
    e_.mem.accept(kRecvOff, sizeof(m));
    e_.mem.expect(kRecvOff + sizeof(m), slen - sizeof(m), send_seed(pair_, from, i), sizeof(m));
    e_.mem.expect(woff, wlen, write_seed(pair_, from, i));
    // The next message can only come after our answer, so the receive is
    // always posted in time (no RNR).
    if (!post_recv()) return "ibv_post_recv failed";
    return "";
  }

  int pair_, role_;
  LocalEnd e_;
  WireInfo peer_;
};

TEST(ManyPairsTest, EightPairsPingPongWithSendAndWriteConcurrently) {
  std::unique_ptr<PeerProcess> procs[kPairs][2];
  for (int p = 0; p < kPairs; ++p) {
    for (int role = 0; role < 2; ++role) {
      procs[p][role] = PeerProcess::spawn([p, role](Channel& ch) { return PairSide(p, role).main(ch); });
      ASSERT_TRUE(procs[p][role]) << "fork";
    }
  }
  // Relay each side's WireInfo to its partner.
  WireInfo info[kPairs][2];
  for (int p = 0; p < kPairs; ++p)
    for (int role = 0; role < 2; ++role)
      ASSERT_TRUE(procs[p][role]->chan().recv_pod(&info[p][role])) << procs[p][role]->chan().error();
  for (int p = 0; p < kPairs; ++p)
    for (int role = 0; role < 2; ++role) ASSERT_TRUE(procs[p][role]->chan().send_pod(info[p][1 - role]));
  for (int p = 0; p < kPairs; ++p) {
    for (int role = 0; role < 2; ++role) {
      int32_t ready = 0;
      ASSERT_TRUE(procs[p][role]->chan().recv_pod(&ready))
          << "pair " << p << " role " << role << ": " << procs[p][role]->chan().error();
    }
  }

  // Expect: every process completes every round with every byte right.
  const auto t0 = std::chrono::steady_clock::now();
  for (int p = 0; p < kPairs; ++p)
    for (int role = 0; role < 2; ++role) ASSERT_TRUE(procs[p][role]->chan().send_pod(int32_t(1)));
  for (int p = 0; p < kPairs; ++p) {
    for (int role = 0; role < 2; ++role) {
      Result r;
      ASSERT_TRUE(procs[p][role]->chan().recv_pod(&r, kRunMs + kWaitMs))
          << "pair " << p << " role " << role << ": " << procs[p][role]->chan().error();
      EXPECT_TRUE(r.ok) << r.msg;
      EXPECT_EQ(r.iters, kIters) << r.msg;
    }
  }
  const double run_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (int p = 0; p < kPairs; ++p)
    for (int role = 0; role < 2; ++role) ASSERT_TRUE(procs[p][role]->chan().send_pod(int32_t(1)));
  for (int p = 0; p < kPairs; ++p)
    for (int role = 0; role < 2; ++role)
      EXPECT_EQ(procs[p][role]->wait_exit(), 0) << "pair " << p << " role " << role;
  printf("%d pairs x %u rounds (WRITE + SEND each way per round): %.0f ms\n", kPairs, kIters, run_ms);
}

}  // namespace
}  // namespace uroce::test
