// Where a receive's local keys are checked: only where the message's bytes
// land. libfabric's verbs provider posts receives of unregistered buffers
// (address 0, 64 bytes, key 0) for messages without data: fabtests'
// `fi_shared_ctx -e msg --no-tx-shared-ctx` (MSG endpoints sharing a
// receive context, an SRQ) sends 0 bytes into them and expects both sides
// to succeed, as they do over rxe (it copies nothing for a 0-byte message)
// and over uroce's network link. The intra-host link used to check every
// piece of the receive and failed them: LOC_PROT_ERR at the receiver,
// REM_OP_ERR at the sender. Bytes into such a receive are still a local
// protection error.
#include <cstring>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

class ReceiveKeys : public VerbsTest {
 protected:
  void TearDown() override {
    for (ibv_qp* q : {a_, b_})
      if (q) ibv_destroy_qp(q);
    if (srq_) ibv_destroy_srq(srq_);
    if (mr_) ibv_dereg_mr(mr_);
    for (ibv_cq* c : {cq_a_, cq_b_})
      if (c) ibv_destroy_cq(c);
    if (pd_) ibv_dealloc_pd(pd_);
  }
  /// Two connected RC QPs; b receives through an SRQ when `srq`.
  void make(bool srq) {
    pd_ = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
    cq_a_ = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
    cq_b_ = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
    ASSERT_TRUE(cq_a_ && cq_b_);
    mr_ = ibv_reg_mr(pd_, buf_, sizeof(buf_), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr_, nullptr);
    if (srq) {
      ibv_srq_init_attr sa{};
      sa.attr.max_wr = 8;
      sa.attr.max_sge = 1;
      srq_ = ibv_create_srq(pd_, &sa);
      ASSERT_NE(srq_, nullptr);
    }
    ibv_qp_init_attr qa{};
    qa.qp_type = IBV_QPT_RC;
    qa.cap = {8, 8, 1, 1, 64};
    qa.send_cq = qa.recv_cq = cq_a_;
    a_ = ibv_create_qp(pd_, &qa);
    qa.send_cq = qa.recv_cq = cq_b_;
    qa.srq = srq_;
    b_ = ibv_create_qp(pd_, &qa);
    ASSERT_TRUE(a_ && b_);
    ASSERT_EQ(connect_rc(a_, b_->qp_num, gid_, {}), 0);
    ASSERT_EQ(connect_rc(b_, a_->qp_num, gid_, {}), 0);
  }
  /// A receive of 64 bytes at address 0 with key 0: no registered memory.
  int post_keyless_recv(uint64_t wr_id) {
    ibv_sge s{0, 64, 0};
    ibv_recv_wr w{};
    w.wr_id = wr_id;
    w.sg_list = &s;
    w.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return srq_ ? ibv_post_srq_recv(srq_, &w, &bad) : ibv_post_recv(b_, &w, &bad);
  }
  /// A SEND of `len` bytes (0: no gather list at all, inline, as libfabric).
  int send(uint64_t wr_id, uint32_t len) {
    ibv_sge s{reinterpret_cast<uint64_t>(buf_), len, mr_->lkey};
    return len ? post_send(a_, wr_id, IBV_WR_SEND, &s, 1)
               : post_send(a_, wr_id, IBV_WR_SEND, nullptr, 0, 0, 0, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
  }
  void zero_bytes_complete_and_bytes_do_not() {
    ASSERT_EQ(post_keyless_recv(1), 0);
    ASSERT_EQ(send(10, 0), 0);
    auto s = poll_one(cq_a_);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->status, IBV_WC_SUCCESS) << ibv_wc_status_str(s->status);
    auto r = poll_one(cq_b_);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, IBV_WC_SUCCESS) << ibv_wc_status_str(r->status);
    EXPECT_EQ(r->wr_id, 1u);
    EXPECT_EQ(r->byte_len, 0u);
    // Eight bytes into the same kind of receive: they would land in memory
    // nobody registered.
    ASSERT_EQ(post_keyless_recv(2), 0);
    ASSERT_EQ(send(11, 8), 0);
    r = poll_one(cq_b_);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, IBV_WC_LOC_PROT_ERR);
    s = poll_one(cq_a_);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->status, IBV_WC_REM_OP_ERR);
  }
  ibv_pd* pd_ = nullptr;
  ibv_cq *cq_a_ = nullptr, *cq_b_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_srq* srq_ = nullptr;
  ibv_qp *a_ = nullptr, *b_ = nullptr;
  uint8_t buf_[256] = {};
};

TEST_F(ReceiveKeys, AZeroByteSendFillsAKeylessReceiveOfAnSrq) {
  make(true);
  zero_bytes_complete_and_bytes_do_not();
}

TEST_F(ReceiveKeys, AZeroByteSendFillsAKeylessReceiveOfTheQpsOwnQueue) {
  make(false);
  zero_bytes_complete_and_bytes_do_not();
}

}  // namespace
}  // namespace uroce::fault
