// A peer whose context segment holds nonsense (issue 15). On the intra-host
// link this process acts as the peer's NIC: it claims the peer's receives,
// checks its keys and writes its completions, all in the peer's segment. When
// the peer (a bug, a stray write, a hostile process of the same user) puts
// nonsense there -- a wrong magic, offsets outside the segment, a ring whose
// tail jumps 2^40 ahead, a CQ of 2^31 entries, every byte overwritten --
// this process must report an error (the SEND completes with
// IBV_WC_RETRY_EXC_ERR, as towards a peer that is gone, and its QP goes to
// ERR) and never touch memory outside the segment (the ASan tree runs this).
//
// Rules: DESIGN.md invariant 4 (a peer never wedges anyone else); ibv_poll_cq(3).
#include <poll.h>

#include <cstdlib>
#include <cstring>

#include "fault/errors/fault_harness.h"
#include "fault/errors/scribble.h"

namespace uroce::fault {
namespace {

class CorruptSegment : public VerbsTest, public ::testing::WithParamInterface<uint32_t> {
 protected:
  /// Starts a peer (corrupted from the start if `before`) and connects to it.
  void start_peer(uint32_t before) {
    // Over the network link (the udp variant of these tests) this process
    // never reads the peer's segment: nothing to test.
    if (const char* l = getenv("UROCE_LINK"); l && strcmp(l, "udp") == 0)
      GTEST_SKIP() << "the intra-host link only (UROCE_LINK=udp)";
    ASSERT_TRUE(make_endpoint(ctx_, {}, &e_));
    PeerHello h{};
    h.qpn = e_.qp->qp_num;
    memcpy(h.gid, gid_.raw, 16);
    // Two: the second SEND after a corruption has used up what the first
    // claim saw posted, so it reads the ring's tail again (kRqTailJump).
    h.recvs = 2;
    h.corrupt = before;
    ASSERT_TRUE(peer_.start(h, &ready_));
    RcParams p;
    p.timeout = 10;  // ~4 ms
    p.retry_cnt = 3;
    p.rnr_retry = 3;
    ibv_gid pg;
    memcpy(pg.raw, ready_.gid, 16);
    ASSERT_EQ(connect_rc(e_.qp, ready_.qpn, pg, p), 0);
  }
  int send(uint64_t wr_id) {
    ibv_sge s = e_.sge(0, 64);
    return post_send(e_.qp, wr_id, IBV_WR_SEND, &s, 1);
  }
  /// Two SENDs towards the corrupted peer: each completes (bounded); the
  /// last with an error, after which the QP is in ERR.
  void expect_error_completions() {
    ASSERT_EQ(send(10), 0);
    ASSERT_EQ(send(11), 0);
    auto wcs = poll_n(e_.send_cq, 2, kWaitMs);
    ASSERT_EQ(wcs.size(), 2u) << "SENDs to a corrupted peer did not complete within " << kWaitMs << " ms";
    EXPECT_NE(wcs.back().status, IBV_WC_SUCCESS);
    for (const ibv_wc& wc : wcs) {
      if (wc.status != IBV_WC_SUCCESS) {
        EXPECT_TRUE(wc.status == IBV_WC_RETRY_EXC_ERR || wc.status == IBV_WC_WR_FLUSH_ERR)
            << ibv_wc_status_str(wc.status);
      }
    }
    EXPECT_EQ(query_state(e_.qp), IBV_QPS_ERR);
  }

  Endpoint e_;
  Peer peer_;
  PeerReady ready_{};
};

// Nonsense the peer wrote before this process first looked at its segment:
// found when the segment is mapped or the QP resolved.
class CorruptBeforeMapping : public CorruptSegment {};

TEST_P(CorruptBeforeMapping, SendsFailAndMemoryStaysSafe) {
  ASSERT_NO_FATAL_FAILURE(start_peer(GetParam()));
  if (IsSkipped()) return;
  expect_error_completions();
}

INSTANTIATE_TEST_SUITE_P(Peer, CorruptBeforeMapping, ::testing::Values(kSegMagic, kMrTableOff, kQpRingOffs));

// Nonsense written while the connection works: found at the next operation.
class CorruptWhileConnected : public CorruptSegment {};

TEST_P(CorruptWhileConnected, SendsFailAndMemoryStaysSafe) {
  ASSERT_NO_FATAL_FAILURE(start_peer(kNoCorruption));
  if (IsSkipped()) return;
  ASSERT_EQ(send(1), 0);
  auto ok = poll_one(e_.send_cq);
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, IBV_WC_SUCCESS) << ibv_wc_status_str(ok->status);
  ASSERT_TRUE(peer_.corrupt(GetParam()));
  expect_error_completions();
}

INSTANTIATE_TEST_SUITE_P(Peer, CorruptWhileConnected,
                         ::testing::Values(kRqSlotsOff, kRqStride, kRqTailJump, kCqSlotsOff, kCqCapacity,
                                           kScribble));

// Nonsense a peer wrote into this process's own segment: peers write into
// its CQs and receive queues, so one could scribble over their geometry. This
// process keeps its CQs' geometry privately (polls are unaffected) and checks
// the ring's copy before it writes a completion or a receive; nonsense there
// makes the device fatal (IBV_EVENT_DEVICE_FATAL, as a NIC whose queues were
// corrupted), never an access outside the segment. Both links: the rings
// are the same.
class CorruptOwnSegment : public VerbsTest {};

TEST_F(CorruptOwnSegment, DeviceGoesFatalAndMemoryStaysSafe) {
  Endpoint e;
  ASSERT_TRUE(make_endpoint(ctx_, {}, &e));
  ASSERT_EQ(to_init(e.qp, kAllRemote), 0);
  ibv_sge s = e.sge(0, 64);
  ASSERT_EQ(post_recv(e.qp, 1, &s, 1), 0);
  ASSERT_EQ(corrupt_segment(kCqSlotsOff, e.qp->qp_num), 0);
  ASSERT_EQ(corrupt_segment(kCqCapacity, e.qp->qp_num), 0);
  ibv_wc wc;
  EXPECT_EQ(ibv_poll_cq(e.recv_cq, 1, &wc), 0);  // its own geometry: nothing there yet
  // The flush of the posted receive writes a completion into that CQ.
  EXPECT_EQ(to_state(e.qp, IBV_QPS_ERR), 0);
  pollfd p{ctx_->async_fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, kWaitMs), 1) << "no async event within " << kWaitMs << " ms";
  ibv_async_event ev;
  ASSERT_EQ(ibv_get_async_event(ctx_, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_DEVICE_FATAL) << ibv_event_type_str(ev.event_type);
  ibv_ack_async_event(&ev);
  // A receive queue whose geometry points far outside: refused.
  ASSERT_EQ(corrupt_segment(kRqSlotsOff, e.qp->qp_num), 0);
  EXPECT_NE(post_recv(e.qp, 2, &s, 1), 0);
  EXPECT_GE(ibv_poll_cq(e.recv_cq, 1, &wc), 0);
}

}  // namespace
}  // namespace uroce::fault
