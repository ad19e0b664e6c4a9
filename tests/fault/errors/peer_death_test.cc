// Case 8: when the process owning the remote QP is killed (SIGKILL), the
// survivor's RC SEND / RDMA WRITE / RDMA READ gets no answer and completes with
// IBV_WC_RETRY_EXC_ERR once the local ACK timer has expired retry_cnt times
// (timeout 10 = ~4 ms, retry_cnt 3: ~17 ms); the wait is bounded at 5 s and
// no timing is asserted. The survivor's QP then is in ERR and flushes.
//
// Rules: IBA vol. 1 9.7.6.1.3 (local ACK timeout, retry counter, completion
// with "transport retry counter exceeded"); ibv_poll_cq(3)
// IBV_WC_RETRY_EXC_ERR ("If this happens after sending the first message,
// usually it means that the remote QP isn't available anymore");
// DESIGN.md invariant 4 (a process that dies never wedges anyone else).
#include <signal.h>

#include <cstring>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

class PeerDeath : public VerbsTest {
 protected:
  /// Starts a peer with `recvs` receives posted and connects our QP to it.
  void start_peer(uint32_t recvs, uint8_t rnr_retry) {
    ASSERT_TRUE(make_endpoint(ctx_, {}, &e_));
    PeerHello h{};
    h.qpn = e_.qp->qp_num;
    memcpy(h.gid, gid_.raw, 16);
    h.recvs = recvs;
    ASSERT_TRUE(peer_.start(h, &ready_));
    RcParams p;
    p.timeout = 10;  // 4.096 us * 2^10 = ~4 ms
    p.retry_cnt = 3;
    p.rnr_retry = rnr_retry;
    ibv_gid pg;
    memcpy(pg.raw, ready_.gid, 16);
    ASSERT_EQ(connect_rc(e_.qp, ready_.qpn, pg, p), 0);
  }

  /// Posts one signaled WR of `op` towards the peer.
  int post(uint64_t wr_id, ibv_wr_opcode op) {
    ibv_sge s = e_.sge(0, 64);
    return post_send(e_.qp, wr_id, op, &s, 1, ready_.addr, ready_.rkey);
  }

  /// The survivor's view after the peer died: RETRY_EXC_ERR for `wr_id`,
  /// QP in ERR, later work flushed.
  void expect_retry_exceeded(uint64_t wr_id) {
    auto wc = poll_one(e_.send_cq, kWaitMs);
    ASSERT_TRUE(wc) << "no completion within " << kWaitMs << " ms after the peer died";
    EXPECT_EQ(wc->wr_id, wr_id);
    EXPECT_EQ(wc->status, IBV_WC_RETRY_EXC_ERR) << ibv_wc_status_str(wc->status);
    EXPECT_EQ(query_state(e_.qp), IBV_QPS_ERR);
    ASSERT_EQ(post(wr_id + 1, IBV_WR_SEND), 0);
    auto fl = poll_one(e_.send_cq);
    ASSERT_TRUE(fl);
    EXPECT_EQ(fl->wr_id, wr_id + 1);
    EXPECT_EQ(fl->status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(fl->status);
  }

  Endpoint e_;
  Peer peer_;  // declared after e_: the peer is killed before our QP goes away
  PeerReady ready_{};
};

TEST_F(PeerDeath, SendAfterPeerKilled) {
  ASSERT_NO_FATAL_FAILURE(start_peer(4, 0));
  // The connection works while the peer lives.
  ASSERT_EQ(post(1, IBV_WR_SEND), 0);
  auto ok = poll_one(e_.send_cq);
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, IBV_WC_SUCCESS) << ibv_wc_status_str(ok->status);

  ASSERT_TRUE(peer_.kill_and_reap(SIGKILL));
  ASSERT_EQ(post(2, IBV_WR_SEND), 0);
  expect_retry_exceeded(2);
}

TEST_F(PeerDeath, RdmaWriteAfterPeerKilled) {
  ASSERT_NO_FATAL_FAILURE(start_peer(0, 0));
  ASSERT_EQ(post(1, IBV_WR_RDMA_WRITE), 0);
  auto ok = poll_one(e_.send_cq);
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, IBV_WC_SUCCESS) << ibv_wc_status_str(ok->status);

  ASSERT_TRUE(peer_.kill_and_reap(SIGKILL));
  ASSERT_EQ(post(2, IBV_WR_RDMA_WRITE), 0);
  expect_retry_exceeded(2);
}

TEST_F(PeerDeath, SendToAnUnreapedZombie) {
  // The peer has exited but nobody reaped it yet: its pid still exists, and
  // uroced may not have noticed the death yet. Nothing may land; the
  // transport gives up.
  ASSERT_NO_FATAL_FAILURE(start_peer(4, 0));
  ASSERT_TRUE(peer_.kill_leave_zombie());
  ASSERT_EQ(post(1, IBV_WR_SEND), 0);
  expect_retry_exceeded(1);
  EXPECT_TRUE(peer_.kill_and_reap(SIGKILL));
}

TEST_F(PeerDeath, RdmaReadAfterPeerKilled) {
  ASSERT_NO_FATAL_FAILURE(start_peer(0, 0));
  ASSERT_EQ(post(1, IBV_WR_RDMA_READ), 0);
  auto ok = poll_one(e_.send_cq);
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, IBV_WC_SUCCESS) << ibv_wc_status_str(ok->status);

  ASSERT_TRUE(peer_.kill_and_reap(SIGKILL));
  ASSERT_EQ(post(2, IBV_WR_RDMA_READ), 0);
  expect_retry_exceeded(2);
}

TEST_F(PeerDeath, SendWaitingOnRnrWhenPeerDies) {
  // rnr_retry 7 would wait for a receive forever; the peer's death turns the
  // RNR wait into silence, and silence into RETRY_EXC_ERR.
  ASSERT_NO_FATAL_FAILURE(start_peer(0, 7));
  ASSERT_EQ(post(1, IBV_WR_SEND), 0);
  EXPECT_TRUE(poll_for(e_.send_cq, 30).empty());
  ASSERT_TRUE(peer_.kill_and_reap(SIGKILL));
  expect_retry_exceeded(1);
}

}  // namespace
}  // namespace uroce::fault
