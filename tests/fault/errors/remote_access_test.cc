// Case 2: a one-sided operation the target does not permit -- invalid rkey,
// range outside the region, region or QP without the access right -- ends
// with IBV_WC_REM_ACCESS_ERR at the initiator; no byte moves; the initiator's
// QP is in ERR (ibv_query_qp) and everything posted on it afterwards
// completes with IBV_WC_WR_FLUSH_ERR.
//
// Rules: IBA vol. 1 9.7.5.1.3 / C9-95 (responder R_Key, bounds and access
// checks, NAK Remote Access Error), 9.7.5.2 (the requester completes the WQE
// in error and moves the QP to ERR), 10.3.1.x (a QP in ERR flushes);
// ibv_poll_cq(3) IBV_WC_REM_ACCESS_ERR, ibv_modify_qp(3) qp_access_flags,
// ibv_reg_mr(3) access flags.
#include <cstring>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

enum class Bad { kRkey, kPastEnd, kBeforeStart, kMrAccess, kQpAccess, kOtherPd };

struct Case {
  const char* name;
  ibv_wr_opcode op;
  Bad bad;
  unsigned target_mr_access;  // access of the region the rkey names
  unsigned target_qp_access;  // the target QP's qp_access_flags
};

constexpr unsigned kLw = IBV_ACCESS_LOCAL_WRITE;

const Case kCases[] = {
    {"WriteGarbageRkey", IBV_WR_RDMA_WRITE, Bad::kRkey, kAllRemote, kAllRemote},
    {"ReadGarbageRkey", IBV_WR_RDMA_READ, Bad::kRkey, kAllRemote, kAllRemote},
    {"AtomicGarbageRkey", IBV_WR_ATOMIC_FETCH_AND_ADD, Bad::kRkey, kAllRemote, kAllRemote},
    {"WritePastEnd", IBV_WR_RDMA_WRITE, Bad::kPastEnd, kAllRemote, kAllRemote},
    {"WriteBeforeStart", IBV_WR_RDMA_WRITE, Bad::kBeforeStart, kAllRemote, kAllRemote},
    {"ReadPastEnd", IBV_WR_RDMA_READ, Bad::kPastEnd, kAllRemote, kAllRemote},
    {"WriteToMrWithoutRemoteWrite", IBV_WR_RDMA_WRITE, Bad::kMrAccess, kLw | IBV_ACCESS_REMOTE_READ,
     kAllRemote},
    {"ReadFromMrWithoutRemoteRead", IBV_WR_RDMA_READ, Bad::kMrAccess, kLw | IBV_ACCESS_REMOTE_WRITE,
     kAllRemote},
    {"AtomicOnMrWithoutRemoteAtomic", IBV_WR_ATOMIC_FETCH_AND_ADD, Bad::kMrAccess,
     kLw | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, kAllRemote},
    {"WriteToQpWithoutRemoteWrite", IBV_WR_RDMA_WRITE, Bad::kQpAccess, kAllRemote,
     kLw | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC},
    {"ReadFromQpWithoutRemoteRead", IBV_WR_RDMA_READ, Bad::kQpAccess, kAllRemote,
     kLw | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC},
    {"AtomicOnQpWithoutRemoteAtomic", IBV_WR_ATOMIC_FETCH_AND_ADD, Bad::kQpAccess, kAllRemote,
     kLw | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ},
    {"WriteWithRkeyOfAnotherPd", IBV_WR_RDMA_WRITE, Bad::kOtherPd, kAllRemote, kAllRemote},
    {"ReadWithRkeyOfAnotherPd", IBV_WR_RDMA_READ, Bad::kOtherPd, kAllRemote, kAllRemote},
};

class RemoteAccess : public VerbsTest, public ::testing::WithParamInterface<Case> {
 protected:
  ~RemoteAccess() override {
    if (target_mr_) ibv_dereg_mr(target_mr_);
    if (other_mr_) ibv_dereg_mr(other_mr_);
    if (other_pd_) ibv_dealloc_pd(other_pd_);
  }

  RcPair p_;
  ibv_mr* target_mr_ = nullptr;
  ibv_pd* other_pd_ = nullptr;
  ibv_mr* other_mr_ = nullptr;
};

TEST_P(RemoteAccess, RemAccessErrThenQpInErrAndFlush) {
  const Case& c = GetParam();
  RcParams pa, pb;
  pb.qp_access = c.target_qp_access;
  ASSERT_TRUE(make_rc_pair(ctx_, &p_, {}, pa, pb));

  // The window the initiator aims at: b's bytes [8192, 12288).
  constexpr size_t kWin = 8192, kWinLen = 4096;
  target_mr_ = ibv_reg_mr(p_.b.pd, p_.b.at(kWin), kWinLen, int(c.target_mr_access));
  ASSERT_NE(target_mr_, nullptr) << strerror(errno);
  uint64_t raddr = p_.b.addr(kWin) + 64;
  uint32_t rkey = target_mr_->rkey;
  uint32_t len = 64;
  switch (c.bad) {
    case Bad::kRkey:
      rkey ^= 0x5a000000u;
      break;
    case Bad::kPastEnd:
      raddr = p_.b.addr(kWin + kWinLen) - 32;
      break;  // 32 bytes inside, 32 past the end
    case Bad::kBeforeStart:
      raddr = p_.b.addr(kWin) - 32;
      break;
    case Bad::kMrAccess:
    case Bad::kQpAccess:
      break;
    case Bad::kOtherPd:
      // A valid region of the same context, but registered in another PD
      // than the target QP's.
      other_pd_ = ibv_alloc_pd(ctx_);
      ASSERT_NE(other_pd_, nullptr);
      other_mr_ = ibv_reg_mr(other_pd_, p_.b.at(kWin), kWinLen, int(kAllRemote));
      ASSERT_NE(other_mr_, nullptr);
      rkey = other_mr_->rkey;
      break;
  }
  const bool atomic = c.op == IBV_WR_ATOMIC_FETCH_AND_ADD;
  if (atomic) len = 8;

  // Sentinels on both sides, to prove no byte moved.
  memset(p_.a.at(0), 0xa5, 4096);
  memset(p_.b.at(kWin - 64), 0x3c, kWinLen + 128);

  ibv_sge s = p_.a.sge(0, len);
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.opcode = c.op;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (atomic) {
    wr.wr.atomic.remote_addr = raddr;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = 1;
  } else {
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
  }
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(p_.a.qp, &wr, &bad), 0);

  auto wc = poll_one(p_.a.send_cq);
  ASSERT_TRUE(wc) << "no completion within " << kWaitMs << " ms";
  EXPECT_EQ(wc->wr_id, 1u);
  EXPECT_EQ(wc->status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc->status);
  EXPECT_EQ(wc->qp_num, p_.a.qp->qp_num);

  for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(p_.a.buf[i], 0xa5) << "initiator byte " << i << " changed";
  for (size_t i = kWin - 64; i < kWin + kWinLen + 64; ++i)
    ASSERT_EQ(p_.b.buf[i], 0x3c) << "target byte " << i << " changed";

  // IBA 10.3.1: the requester's QP is now in the Error state...
  EXPECT_EQ(query_state(p_.a.qp), IBV_QPS_ERR);
  // ... and what is posted afterwards is flushed, sends and receives alike.
  ibv_sge ok = p_.a.sge(0, 16);
  ASSERT_EQ(post_send(p_.a.qp, 2, IBV_WR_RDMA_WRITE, &ok, 1, p_.b.addr(0), p_.b.mr->rkey), 0);
  ASSERT_EQ(post_send(p_.a.qp, 3, IBV_WR_SEND, &ok, 1), 0);
  auto fl = poll_n(p_.a.send_cq, 2);
  ASSERT_EQ(fl.size(), 2u);
  EXPECT_EQ(fl[0].wr_id, 2u);
  EXPECT_EQ(fl[1].wr_id, 3u);
  for (const ibv_wc& f : fl) EXPECT_EQ(f.status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(f.status);
  ibv_sge r = p_.a.sge(4096, 64);
  ASSERT_EQ(post_recv(p_.a.qp, 4, &r, 1), 0);
  auto rf = poll_one(p_.a.recv_cq);
  ASSERT_TRUE(rf);
  EXPECT_EQ(rf->wr_id, 4u);
  EXPECT_EQ(rf->status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(rf->status);
  // The flushed WRITE did not land either.
  EXPECT_EQ(p_.b.buf[0], 0);
  EXPECT_TRUE(poll_for(p_.a.send_cq, 10).empty()) << "completions beyond one per WR";
}

class RemoteAccessChain : public VerbsTest {
 protected:
  RcPair p_;
};

TEST_F(RemoteAccessChain, WrsPostedTogetherBehindTheFailingOneAreFlushed) {
  // One ibv_post_send list [bad rkey WRITE, good WRITE, SEND]: all three are
  // accepted at post time; the first fails remotely, the rest are flushed and
  // never executed (IBA 10.3.1: the QP is in ERR before they run).
  ASSERT_TRUE(make_rc_pair(ctx_, &p_));
  ibv_sge r = p_.b.sge(0, 64);
  ASSERT_EQ(post_recv(p_.b.qp, 50, &r, 1), 0);
  memset(p_.a.at(0), 0xee, 64);
  ibv_sge s = p_.a.sge(0, 64);
  ibv_send_wr w[3]{};
  for (int i = 0; i < 3; ++i) {
    w[i].wr_id = uint64_t(i + 1);
    w[i].opcode = i == 2 ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
    w[i].sg_list = &s;
    w[i].num_sge = 1;
    w[i].send_flags = IBV_SEND_SIGNALED;
    w[i].wr.rdma.remote_addr = p_.b.addr(4096);
    w[i].wr.rdma.rkey = p_.b.mr->rkey;
    w[i].next = i < 2 ? &w[i + 1] : nullptr;
  }
  w[0].wr.rdma.rkey ^= 0x5a000000u;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(p_.a.qp, w, &bad), 0);
  auto wc = poll_n(p_.a.send_cq, 3);
  ASSERT_EQ(wc.size(), 3u);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc[0].status);
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(wc[i].wr_id, uint64_t(i + 1));
    EXPECT_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(wc[i].status);
  }
  EXPECT_EQ(p_.b.buf[4096], 0) << "the flushed WRITE was executed";
  EXPECT_EQ(p_.b.buf[0], 0) << "the flushed SEND was executed";
  EXPECT_EQ(query_state(p_.a.qp), IBV_QPS_ERR);
}

INSTANTIATE_TEST_SUITE_P(Cases, RemoteAccess, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace uroce::fault
