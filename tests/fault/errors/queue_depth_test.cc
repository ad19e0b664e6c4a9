// Case 6: posting beyond a queue's depth fails at post time with ENOMEM and
// *bad_wr naming the first WR that did not fit; the WRs before it are posted
// (and complete) and the refused ones are not executed. Posting a send on a
// QP in RESET, INIT or RTR fails with EINVAL.
//
// Rules: ibv_post_send(3) / ibv_post_recv(3) / ibv_post_srq_recv(3) ("stops
// processing WRs from this list at the first failure ... and returns this
// failing WR through bad_wr"); IBA vol. 1 11.4.1 (Post Send / Post Receive
// Request: an immediate error when the queue is full, and for Post Send when
// the QP is in Reset, Init or RTR) and ch. 10.8 (an unsignaled WR keeps its
// send-queue slot until a later signaled completion is polled).
#include <cstring>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

constexpr uint32_t kDepth = 8;

/// `n` WRs linked into one list.
std::vector<ibv_send_wr> chain_writes(size_t n, ibv_sge* sge, uint64_t raddr, uint32_t rkey, unsigned flags) {
  std::vector<ibv_send_wr> w(n);
  for (size_t i = 0; i < n; ++i) {
    w[i].wr_id = i;
    w[i].opcode = IBV_WR_RDMA_WRITE;
    w[i].sg_list = sge;
    w[i].num_sge = 1;
    w[i].send_flags = flags;
    w[i].wr.rdma.remote_addr = raddr + i * 8;
    w[i].wr.rdma.rkey = rkey;
    w[i].next = i + 1 < n ? &w[i + 1] : nullptr;
  }
  return w;
}

std::vector<ibv_recv_wr> chain_recvs(size_t n, ibv_sge* sge) {
  std::vector<ibv_recv_wr> w(n);
  for (size_t i = 0; i < n; ++i) {
    w[i].wr_id = 1000 + i;
    w[i].sg_list = sge;
    w[i].num_sge = 1;
    w[i].next = i + 1 < n ? &w[i + 1] : nullptr;
  }
  return w;
}

uint32_t send_depth(ibv_qp* qp) {
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  ibv_query_qp(qp, &a, IBV_QP_CAP, &ia);
  return a.cap.max_send_wr;
}

uint32_t recv_depth(ibv_qp* qp) {
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  ibv_query_qp(qp, &a, IBV_QP_CAP, &ia);
  return a.cap.max_recv_wr;
}

class QueueDepth : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    EndpointOptions o;
    o.max_send_wr = kDepth;
    o.max_recv_wr = kDepth;
    ASSERT_TRUE(make_rc_pair(ctx_, &p_, o));
  }
  RcPair p_;
};

TEST_F(QueueDepth, SendListOneLongerThanTheQueue) {
  const uint32_t depth = send_depth(p_.a.qp);
  ASSERT_GE(depth, kDepth);
  memset(p_.a.at(0), 0x99, 8);
  ibv_sge s = p_.a.sge(0, 8);
  auto w = chain_writes(depth + 1, &s, p_.b.addr(0), p_.b.mr->rkey, IBV_SEND_SIGNALED);
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(p_.a.qp, w.data(), &bad), ENOMEM);
  EXPECT_EQ(bad, &w[depth]) << "bad_wr must name the first WR that did not fit";

  // The first `depth` were posted and complete, in order; the last was not executed.
  auto wc = poll_n(p_.a.send_cq, depth);
  ASSERT_EQ(wc.size(), depth);
  for (uint32_t i = 0; i < depth; ++i) {
    EXPECT_EQ(wc[i].wr_id, i);
    EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc[i].status);
  }
  EXPECT_TRUE(poll_for(p_.a.send_cq, 10).empty());
  EXPECT_EQ(p_.b.buf[depth * 8], 0) << "the refused WR was executed";
  EXPECT_EQ(p_.b.buf[(depth - 1) * 8], 0x99);

  // Polling gave the slots back: the refused WR can be posted again.
  w[depth].next = nullptr;
  EXPECT_EQ(ibv_post_send(p_.a.qp, &w[depth], &bad), 0);
  auto last = poll_one(p_.a.send_cq);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->wr_id, depth);
  EXPECT_EQ(last->status, IBV_WC_SUCCESS);
}

TEST_F(QueueDepth, SendOneAtATimeWithoutPolling) {
  const uint32_t depth = send_depth(p_.a.qp);
  ibv_sge s = p_.a.sge(0, 8);
  for (uint32_t i = 0; i < depth; ++i)
    ASSERT_EQ(post_send(p_.a.qp, i, IBV_WR_RDMA_WRITE, &s, 1, p_.b.addr(0), p_.b.mr->rkey), 0) << "WR " << i;
  auto w = chain_writes(1, &s, p_.b.addr(0), p_.b.mr->rkey, IBV_SEND_SIGNALED);
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(p_.a.qp, w.data(), &bad), ENOMEM);
  EXPECT_EQ(bad, &w[0]);
  EXPECT_EQ(poll_n(p_.a.send_cq, depth + 1, 200).size(), depth);
}

TEST_F(QueueDepth, UnsignaledWrsHoldTheirSlotsUntilASignaledOneIsPolled) {
  const uint32_t depth = send_depth(p_.a.qp);
  ibv_sge s = p_.a.sge(0, 8);
  auto w = chain_writes(depth, &s, p_.b.addr(0), p_.b.mr->rkey, 0);
  w[depth - 1].send_flags = IBV_SEND_SIGNALED;  // the last one reports for all
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(p_.a.qp, w.data(), &bad), 0);
  auto more = chain_writes(1, &s, p_.b.addr(0), p_.b.mr->rkey, IBV_SEND_SIGNALED);
  EXPECT_EQ(ibv_post_send(p_.a.qp, more.data(), &bad), ENOMEM);
  EXPECT_EQ(bad, &more[0]);
  auto wc = poll_one(p_.a.send_cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->wr_id, depth - 1);
  // Now the whole queue is free again.
  auto again = chain_writes(depth, &s, p_.b.addr(0), p_.b.mr->rkey, IBV_SEND_SIGNALED);
  EXPECT_EQ(ibv_post_send(p_.a.qp, again.data(), &bad), 0);
  EXPECT_EQ(poll_n(p_.a.send_cq, depth).size(), depth);
}

TEST_F(QueueDepth, WrsWaitingOnRnrHoldTheirSlotsAndFlushOnce) {
  // No receive at b (rnr_retry 7): every SEND waits, still occupying its slot.
  const uint32_t depth = send_depth(p_.a.qp);
  ibv_sge s = p_.a.sge(0, 8);
  for (uint32_t i = 0; i < depth; ++i) ASSERT_EQ(post_send(p_.a.qp, i, IBV_WR_SEND, &s, 1), 0) << "WR " << i;
  ibv_send_wr more{};
  more.wr_id = depth;
  more.opcode = IBV_WR_SEND;
  more.sg_list = &s;
  more.num_sge = 1;
  more.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(p_.a.qp, &more, &bad), ENOMEM);
  EXPECT_EQ(bad, &more);
  // ERR flushes each waiting WR exactly once, in order, and frees the queue.
  ASSERT_EQ(to_state(p_.a.qp, IBV_QPS_ERR), 0);
  auto fl = poll_n(p_.a.send_cq, depth + 1, 200);
  ASSERT_EQ(fl.size(), depth);
  for (uint32_t i = 0; i < depth; ++i) {
    EXPECT_EQ(fl[i].wr_id, i);
    EXPECT_EQ(fl[i].status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(fl[i].status);
  }
  EXPECT_EQ(ibv_post_send(p_.a.qp, &more, &bad), 0);
  auto last = poll_one(p_.a.send_cq);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->wr_id, depth);
  EXPECT_EQ(last->status, IBV_WC_WR_FLUSH_ERR);
}

TEST_F(QueueDepth, RecvListOneLongerThanTheQueue) {
  const uint32_t depth = recv_depth(p_.b.qp);
  ASSERT_GE(depth, kDepth);
  ibv_sge r = p_.b.sge(0, 64);
  auto w = chain_recvs(depth + 1, &r);
  ibv_recv_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_recv(p_.b.qp, w.data(), &bad), ENOMEM);
  EXPECT_EQ(bad, &w[depth]);
  // Exactly the first `depth` are posted: moving to ERR flushes those, once each.
  ASSERT_EQ(to_state(p_.b.qp, IBV_QPS_ERR), 0);
  auto fl = poll_n(p_.b.recv_cq, depth + 1, 200);
  ASSERT_EQ(fl.size(), depth);
  for (uint32_t i = 0; i < depth; ++i) {
    EXPECT_EQ(fl[i].wr_id, 1000 + i);
    EXPECT_EQ(fl[i].status, IBV_WC_WR_FLUSH_ERR);
  }
}

TEST_F(QueueDepth, RecvQueueFullThenFreedByConsumption) {
  const uint32_t depth = recv_depth(p_.b.qp);
  ibv_sge r = p_.b.sge(0, 64);
  auto w = chain_recvs(depth, &r);
  ibv_recv_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_recv(p_.b.qp, w.data(), &bad), 0);
  auto one = chain_recvs(1, &r);
  EXPECT_EQ(ibv_post_recv(p_.b.qp, one.data(), &bad), ENOMEM);
  EXPECT_EQ(bad, &one[0]);
  // A SEND consumes one receive; its slot can be reused.
  ibv_sge s = p_.a.sge(0, 8);
  ASSERT_EQ(post_send(p_.a.qp, 1, IBV_WR_SEND, &s, 1), 0);
  ASSERT_TRUE(poll_one(p_.b.recv_cq));
  EXPECT_EQ(ibv_post_recv(p_.b.qp, one.data(), &bad), 0);
}

TEST_F(QueueDepth, SrqListOneLongerThanTheQueue) {
  ibv_srq_init_attr si{};
  si.attr.max_wr = kDepth;
  si.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(p_.b.pd, &si);
  ASSERT_NE(srq, nullptr) << strerror(errno);
  ibv_srq_attr sa{};
  ASSERT_EQ(ibv_query_srq(srq, &sa), 0);
  const uint32_t depth = sa.max_wr;
  ASSERT_GE(depth, kDepth);
  ibv_sge r = p_.b.sge(0, 64);
  auto w = chain_recvs(depth + 1, &r);
  ibv_recv_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_srq_recv(srq, w.data(), &bad), ENOMEM);
  EXPECT_EQ(bad, &w[depth]);

  // Exactly `depth` are posted: a QP on the SRQ takes `depth` SENDs, and the
  // next one finds no receive (RNR; rnr_retry 0 fails it at once).
  ibv_qp_init_attr ia{};
  ia.send_cq = p_.b.send_cq;
  ia.recv_cq = p_.b.recv_cq;
  ia.srq = srq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = 4;
  ia.cap.max_send_sge = 1;
  ibv_qp* q = ibv_create_qp(p_.b.pd, &ia);
  ASSERT_NE(q, nullptr) << strerror(errno);
  Endpoint tx;
  EndpointOptions o;
  o.max_send_wr = depth + 4;
  ASSERT_TRUE(make_endpoint(ctx_, o, &tx));
  RcParams pr, pt;
  pt.rnr_retry = 0;
  ASSERT_EQ(connect_rc(q, tx.qp->qp_num, gid_, pr), 0);
  ASSERT_EQ(connect_rc(tx.qp, q->qp_num, gid_, pt), 0);
  ibv_sge s = tx.sge(0, 8);
  for (uint32_t i = 0; i <= depth; ++i) ASSERT_EQ(post_send(tx.qp, i, IBV_WR_SEND, &s, 1), 0);
  auto sc = poll_n(tx.send_cq, depth + 1);
  ASSERT_EQ(sc.size(), depth + 1);
  for (uint32_t i = 0; i < depth; ++i) EXPECT_EQ(sc[i].status, IBV_WC_SUCCESS) << "SEND " << i;
  EXPECT_EQ(sc[depth].status, IBV_WC_RNR_RETRY_EXC_ERR) << ibv_wc_status_str(sc[depth].status);
  auto rc = poll_n(p_.b.recv_cq, depth + 1, 200);
  ASSERT_EQ(rc.size(), depth);
  for (uint32_t i = 0; i < depth; ++i) EXPECT_EQ(rc[i].wr_id, 1000 + i);

  ASSERT_EQ(ibv_destroy_qp(q), 0);
  ASSERT_EQ(ibv_destroy_srq(srq), 0);
}

class PostSendState : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    ASSERT_TRUE(make_endpoint(ctx_, {}, &e_));
  }
  /// A SEND in the current state is refused with EINVAL, named by bad_wr, and
  /// produces no completion.
  void expect_refused() {
    ibv_sge s = e_.sge(0, 8);
    ibv_send_wr w[2]{};
    for (int i = 0; i < 2; ++i) {
      w[i].wr_id = uint64_t(i);
      w[i].opcode = IBV_WR_SEND;
      w[i].sg_list = &s;
      w[i].num_sge = 1;
      w[i].send_flags = IBV_SEND_SIGNALED;
    }
    w[0].next = &w[1];
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(e_.qp, w, &bad), EINVAL) << "state " << query_state(e_.qp);
    EXPECT_EQ(bad, &w[0]);
    EXPECT_TRUE(poll_for(e_.send_cq, 10).empty());
  }
  Endpoint e_;
};

TEST_F(PostSendState, RefusedInResetInitAndRtr) {
  ASSERT_EQ(query_state(e_.qp), IBV_QPS_RESET);
  expect_refused();
  ASSERT_EQ(to_init(e_.qp, kAllRemote), 0);
  expect_refused();
  ASSERT_EQ(to_rtr(e_.qp, e_.qp->qp_num, gid_, 1), 0);
  expect_refused();
  // And accepted in RTS (loopback to itself, with a receive to land in).
  ASSERT_EQ(to_rts(e_.qp, 14, 7, 7), 0);
  ibv_sge r = e_.sge(4096, 64);
  ASSERT_EQ(post_recv(e_.qp, 9, &r, 1), 0);
  ibv_sge s = e_.sge(0, 8);
  EXPECT_EQ(post_send(e_.qp, 1, IBV_WR_SEND, &s, 1), 0);
  auto wc = poll_one(e_.send_cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc->status);
}

}  // namespace
}  // namespace uroce::fault
