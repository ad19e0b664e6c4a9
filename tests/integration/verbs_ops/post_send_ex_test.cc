// The extended verbs between two processes: a QP from ibv_create_qp_ex with
// IBV_QP_INIT_ATTR_SEND_OPS_FLAGS posting through ibv_wr_start ..
// ibv_wr_complete (ibv_wr_post(3)), and CQs from ibv_create_cq_ex with
// completion timestamps, read with ibv_start_poll / ibv_next_poll /
// ibv_end_poll and the ibv_wc_read_* accessors (ibv_create_cq_ex(3)).
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "support/verbs_harness.h"

namespace uroce::test {
namespace {

/// One completion as read through the extended CQ accessors.
struct ExWc {
  uint64_t wr_id;
  ibv_wc_status status;
  ibv_wc_opcode opcode;
  uint32_t byte_len;
  uint32_t qp_num;
  uint32_t src_qp;
  unsigned int wc_flags;
  uint32_t imm;  // host order
  uint64_t ts;
};

ExWc read_current(ibv_cq_ex* cq) {
  ExWc w{};
  w.wr_id = cq->wr_id;
  w.status = cq->status;
  w.opcode = ibv_wc_read_opcode(cq);
  w.qp_num = ibv_wc_read_qp_num(cq);
  w.wc_flags = ibv_wc_read_wc_flags(cq);
  w.ts = ibv_wc_read_completion_ts(cq);
  if (w.opcode & IBV_WC_RECV) {
    w.byte_len = ibv_wc_read_byte_len(cq);
    w.src_qp = ibv_wc_read_src_qp(cq);
    if (w.wc_flags & IBV_WC_WITH_IMM) w.imm = ntohl(ibv_wc_read_imm_data(cq));
  }
  return w;
}

/// Polls `cq` with start/next/end_poll until `n` completions or the timeout.
std::vector<ExWc> poll_ex(ibv_cq_ex* cq, size_t n, int timeout_ms = kWaitMs) {
  std::vector<ExWc> out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
    ibv_poll_cq_attr attr;
    memset(&attr, 0, sizeof(attr));
    int rc = ibv_start_poll(cq, &attr);
    if (rc == ENOENT) {  // empty: no end_poll after a failed start
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      continue;
    }
    if (rc != 0) {
      ADD_FAILURE() << "ibv_start_poll: " << strerror(rc);
      break;
    }
    out.push_back(read_current(cq));
    while (out.size() < n && (rc = ibv_next_poll(cq)) == 0) out.push_back(read_current(cq));
    ibv_end_poll(cq);
    if (rc != 0 && rc != ENOENT) {
      ADD_FAILURE() << "ibv_next_poll: " << strerror(rc);
      break;
    }
  }
  return out;
}

struct CqExDeleter {
  void operator()(ibv_cq_ex* c) const {
    if (c) ibv_destroy_cq(ibv_cq_ex_to_cq(c));
  }
};
using CqExPtr = std::unique_ptr<ibv_cq_ex, CqExDeleter>;

constexpr uint64_t kWcFlags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                              IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;

class PostSendExTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    ASSERT_TRUE(open_device(&dev_, &err)) << err;
    ibv_context* ctx = dev_.ctx.get();
    ibv_device_attr_ex dattr;
    memset(&dattr, 0, sizeof(dattr));
    ASSERT_EQ(ibv_query_device_ex(ctx, nullptr, &dattr), 0);
    EXPECT_NE(dattr.completion_timestamp_mask, 0u) << "device says it has no completion timestamps";

    for (CqExPtr* cq : {&scq_, &rcq_}) {
      ibv_cq_init_attr_ex ca;
      memset(&ca, 0, sizeof(ca));
      ca.cqe = 64;
      ca.wc_flags = kWcFlags;
      cq->reset(ibv_create_cq_ex(ctx, &ca));
      ASSERT_TRUE(*cq) << "ibv_create_cq_ex: " << strerror(errno);
    }
    ibv_qp_init_attr_ex qa;
    memset(&qa, 0, sizeof(qa));
    qa.qp_type = IBV_QPT_RC;
    qa.send_cq = ibv_cq_ex_to_cq(scq_.get());
    qa.recv_cq = ibv_cq_ex_to_cq(rcq_.get());
    qa.cap.max_send_wr = 32;
    qa.cap.max_recv_wr = 32;
    qa.cap.max_send_sge = 4;
    qa.cap.max_recv_sge = 4;
    qa.cap.max_inline_data = 128;
    qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    qa.pd = dev_.pd.get();
    qa.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE |
                        IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
                        IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP;
    qp_.reset(ibv_create_qp_ex(ctx, &qa));
    ASSERT_TRUE(qp_) << "ibv_create_qp_ex: " << strerror(errno);
    qpx_ = ibv_qp_to_qp_ex(qp_.get());
    ASSERT_NE(qpx_, nullptr);

    ASSERT_TRUE(mem_.allocate(1u << 20));
    mem_.fill(0, mem_.size(), 40);
    mr_.reset(ibv_reg_mr(dev_.pd.get(), mem_.data(), mem_.size(), kRemoteAccess));
    ASSERT_TRUE(mr_);

    EndConfig cfg;
    cfg.buf_bytes = 1u << 20;
    cfg.bg_seed = 41;
    agent_ = Agent::start(cfg, &err);
    ASSERT_TRUE(agent_) << err;
    WireInfo mine;
    mine.qpn = qp_->qp_num;
    memcpy(mine.gid, dev_.gid.raw, 16);
    ASSERT_TRUE(agent_->connect(mine)) << agent_->error();
    ASSERT_TRUE(connect_qp(qp_.get(), IBV_QPT_RC, agent_->info(), 0, &err)) << err;
  }

  void expect_agent_recv(uint64_t wr_id, ibv_wc_opcode op, uint32_t len, bool imm, uint32_t imm_host) {
    ibv_wc wc;
    ASSERT_EQ(agent_->poll_recv(&wc), 1) << agent_->error();
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
    EXPECT_EQ(wc.wr_id, wr_id) << wc_str(wc);
    EXPECT_EQ(wc.opcode, op) << wc_str(wc);
    EXPECT_EQ(wc.byte_len, len) << wc_str(wc);
    EXPECT_EQ(bool(wc.wc_flags & IBV_WC_WITH_IMM), imm) << wc_str(wc);
    if (imm) {
      EXPECT_EQ(ntohl(wc.imm_data), imm_host) << wc_str(wc);
    }
  }

  Device dev_;
  CqExPtr scq_, rcq_;
  QpPtr qp_;
  ibv_qp_ex* qpx_ = nullptr;
  ShadowedMemory mem_;
  MrPtr mr_;
  std::unique_ptr<Agent> agent_;
};

TEST_F(PostSendExTest, OneBatchOfEveryKindThenTimestampedCompletions) {
  ASSERT_EQ(agent_->post_recv(101, {{0, 8192}}), 0);
  ASSERT_EQ(agent_->post_recv(102, {{8192, 8192}}), 0);
  ASSERT_EQ(agent_->post_recv(103, {{16384, 64}}), 0);
  const uint64_t kTgt = 65536 + 3;
  mem_.fill(0, 3000, 501);        // SEND source
  mem_.fill(4096, 1000, 502, 0);  // WRITE source, two pieces
  mem_.fill(6000, 2000, 502, 1000);
  mem_.fill(10000, 777, 504);                    // WRITE_WITH_IMM source
  ASSERT_TRUE(agent_->fill(200000, 5000, 505));  // READ source at the agent
  uint8_t inl[100];
  fill_pattern(inl, sizeof(inl), 503);
  const uint64_t before = [&] {
    std::vector<uint8_t> b = agent_->read_bytes(300000, 8);
    uint64_t v = 0;
    if (b.size() == 8) memcpy(&v, b.data(), 8);
    return v;
  }();

  ibv_wr_start(qpx_);
  qpx_->wr_id = 1;
  qpx_->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qpx_);
  ibv_wr_set_sge(qpx_, mr_->lkey, mem_.addr(0), 3000);

  qpx_->wr_id = 2;
  ibv_wr_rdma_write(qpx_, agent_->rkey(), agent_->raddr(kTgt));
  ibv_sge two[2] = {{mem_.addr(4096), 1000, mr_->lkey}, {mem_.addr(6000), 2000, mr_->lkey}};
  ibv_wr_set_sge_list(qpx_, 2, two);
  memset(two, 0, sizeof(two));  // the setter took its copy

  qpx_->wr_id = 3;
  ibv_wr_send_imm(qpx_, imm_be(0xabcd0003));
  ibv_wr_set_inline_data(qpx_, inl, sizeof(inl));
  memset(inl, 0xee, sizeof(inl));  // "allows the caller to immediately re-use the buffer"

  qpx_->wr_id = 4;
  ibv_wr_rdma_write_imm(qpx_, agent_->rkey(), agent_->raddr(kTgt + 10000), imm_be(0xabcd0004));
  ibv_wr_set_sge(qpx_, mr_->lkey, mem_.addr(10000), 777);

  qpx_->wr_id = 5;
  ibv_wr_rdma_read(qpx_, agent_->rkey(), agent_->raddr(200000));
  ibv_wr_set_sge(qpx_, mr_->lkey, mem_.addr(100000 + 1), 5000);

  qpx_->wr_id = 6;  // unsignaled: no completion
  qpx_->wr_flags = 0;
  ibv_wr_rdma_write(qpx_, agent_->rkey(), agent_->raddr(kTgt + 20000));
  ibv_wr_set_sge(qpx_, mr_->lkey, mem_.addr(0), 3000);

  qpx_->wr_id = 7;
  qpx_->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_atomic_fetch_add(qpx_, agent_->rkey(), agent_->raddr(300000), 9);
  ibv_wr_set_sge(qpx_, mr_->lkey, mem_.addr(400000), 8);
  ASSERT_EQ(ibv_wr_complete(qpx_), 0);

  std::vector<ExWc> wcs = poll_ex(scq_.get(), 6);
  ASSERT_EQ(wcs.size(), 6u);
  const uint64_t ids[] = {1, 2, 3, 4, 5, 7};
  const ibv_wc_opcode ops[] = {IBV_WC_SEND,       IBV_WC_RDMA_WRITE, IBV_WC_SEND,
                               IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ,  IBV_WC_FETCH_ADD};
  for (size_t i = 0; i < wcs.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "completion " << i);
    EXPECT_EQ(wcs[i].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wcs[i].status);
    EXPECT_EQ(wcs[i].wr_id, ids[i]);
    EXPECT_EQ(wcs[i].opcode, ops[i]);
    EXPECT_EQ(wcs[i].qp_num, qp_->qp_num);
    EXPECT_NE(wcs[i].ts, 0u) << "no completion timestamp";
    // One send queue completes in order, so its timestamps cannot go back.
    if (i) {
      EXPECT_GE(wcs[i].ts, wcs[i - 1].ts);
    }
  }
  EXPECT_TRUE(poll_ex(scq_.get(), 1, 50).empty()) << "a completion for the unsignaled WR";

  ASSERT_NO_FATAL_FAILURE(expect_agent_recv(101, IBV_WC_RECV, 3000, false, 0));
  ASSERT_NO_FATAL_FAILURE(expect_agent_recv(102, IBV_WC_RECV, 100, true, 0xabcd0003));
  ASSERT_NO_FATAL_FAILURE(expect_agent_recv(103, IBV_WC_RECV_RDMA_WITH_IMM, 777, true, 0xabcd0004));
  ASSERT_TRUE(agent_->expect(0, 3000, 501));
  ASSERT_TRUE(agent_->expect(kTgt, 3000, 502));
  ASSERT_TRUE(agent_->expect(8192, 100, 503));
  ASSERT_TRUE(agent_->expect(kTgt + 10000, 777, 504));
  ASSERT_TRUE(agent_->expect(kTgt + 20000, 3000, 501));
  ASSERT_TRUE(agent_->expect_u64(300000, before + 9));
  EXPECT_EQ(agent_->verify(), "");
  mem_.expect(100000 + 1, 5000, 505);
  mem_.expect_u64(400000, before);
  EXPECT_EQ(mem_.verify(), "");
}

TEST_F(PostSendExTest, AbortDiscardsTheBatch) {
  ASSERT_EQ(agent_->post_recv(1, {{0, 4096}}), 0);
  ibv_wr_start(qpx_);
  qpx_->wr_id = 1;
  qpx_->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qpx_);
  ibv_wr_set_sge(qpx_, mr_->lkey, mem_.addr(0), 100);
  ibv_wr_rdma_write(qpx_, agent_->rkey(), agent_->raddr(50000));
  ibv_wr_set_sge(qpx_, mr_->lkey, mem_.addr(0), 100);
  ibv_wr_abort(qpx_);
  EXPECT_TRUE(poll_ex(scq_.get(), 1, 50).empty()) << "an aborted WR completed";
  ibv_wc wc;
  EXPECT_EQ(agent_->poll_recv(&wc, 50), 0) << "an aborted SEND arrived: " << wc_str(wc);
  EXPECT_EQ(agent_->verify(), "") << "an aborted WRITE landed";

  // The QP is fine afterwards.
  mem_.fill(0, 100, 600);
  ibv_wr_start(qpx_);
  qpx_->wr_id = 2;
  ibv_wr_send(qpx_);
  ibv_wr_set_sge(qpx_, mr_->lkey, mem_.addr(0), 100);
  ASSERT_EQ(ibv_wr_complete(qpx_), 0);
  std::vector<ExWc> wcs = poll_ex(scq_.get(), 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 2u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  ASSERT_NO_FATAL_FAILURE(expect_agent_recv(1, IBV_WC_RECV, 100, false, 0));
  ASSERT_TRUE(agent_->expect(0, 100, 600));
  EXPECT_EQ(agent_->verify(), "");
}

TEST_F(PostSendExTest, ExtendedReceiveCompletionsFromAnotherProcess) {
  // The agent sends to us; our receive CQ is an ibv_cq_ex.
  for (uint64_t i = 0; i < 3; ++i) {
    ibv_sge sg{mem_.addr(i * 8192), 8192, mr_->lkey};
    ibv_recv_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = 10 + i;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_recv(qp_.get(), &wr, &bad), 0);
  }
  ASSERT_TRUE(agent_->fill(0, 4000, 700));
  AgentSend s;
  s.wr_id = 1;
  s.sges = {{0, 4000}};
  ASSERT_EQ(agent_->post_send(s), 0);
  s.wr_id = 2;
  s.opcode = IBV_WR_SEND_WITH_IMM;
  s.imm = imm_be(0x7000002);
  ASSERT_EQ(agent_->post_send(s), 0);
  s.wr_id = 3;
  s.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  s.imm = imm_be(0x7000003);
  s.remote_addr = mem_.addr(500000);
  s.rkey = mr_->rkey;
  ASSERT_EQ(agent_->post_send(s), 0);
  for (int i = 0; i < 3; ++i) {
    ibv_wc wc;
    ASSERT_EQ(agent_->poll_send(&wc), 1) << agent_->error();
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
  }
  std::vector<ExWc> wcs = poll_ex(rcq_.get(), 3);
  ASSERT_EQ(wcs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(testing::Message() << "receive " << i);
    EXPECT_EQ(wcs[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wcs[i].wr_id, 10 + i);
    EXPECT_EQ(wcs[i].byte_len, 4000u);
    EXPECT_EQ(wcs[i].qp_num, qp_->qp_num);
    EXPECT_NE(wcs[i].ts, 0u);
  }
  EXPECT_EQ(wcs[0].opcode, IBV_WC_RECV);
  EXPECT_FALSE(wcs[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(wcs[1].opcode, IBV_WC_RECV);
  EXPECT_TRUE(wcs[1].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(wcs[1].imm, 0x7000002u);
  EXPECT_EQ(wcs[2].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_TRUE(wcs[2].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(wcs[2].imm, 0x7000003u);
  mem_.expect(0, 4000, 700);
  mem_.expect(8192, 4000, 700);
  mem_.expect(500000, 4000, 700);
  EXPECT_EQ(mem_.verify(), "");
}

}  // namespace
}  // namespace uroce::test
