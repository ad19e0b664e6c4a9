// SQ Drain (ibv_modify_qp(3) to IBV_QPS_SQD, IBA 10.3.1): work requests that
// had begun finish, then IBV_EVENT_SQ_DRAINED arrives (en_sqd_async_notify);
// work posted while drained waits (no completion, the target untouched) and
// runs after SQD -> RTS, in order. Runs over shared memory and, as
// verbs_ops_sqd_udp_test, over RoCE v2/UDP, where WRITEs may be in flight
// when the QP enters SQD.
#include <gtest/gtest.h>
#include <poll.h>

#include <cstring>

#include "support/verbs_harness.h"

namespace uroce::test {
namespace {

constexpr uint64_t kSrcOff = 0;
constexpr uint64_t kTgtOff = 2u << 20;
constexpr uint32_t kLen = 64u << 10;
constexpr int kBefore = 16;  // WRITEs posted before SQD
constexpr int kDuring = 4;   // WRITEs posted while drained

class SqdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EndConfig cfg;
    cfg.buf_bytes = 4u << 20;
    cfg.bg_seed = 300;
    std::string err;
    ASSERT_TRUE(local_.open(cfg, &err)) << err;
    cfg.buf_bytes = 4u << 20;
    cfg.bg_seed = 400;
    agent_ = Agent::start(cfg, &err);
    ASSERT_TRUE(agent_) << err;
    ASSERT_TRUE(agent_->connect(local_.info())) << agent_->error();
    ASSERT_TRUE(local_.connect(agent_->info(), &err)) << err;
  }

  /// WRITE i: kLen bytes of pattern 1000+i to target slot i (slots of 64 KiB).
  void post_write(int i) {
    local_.mem.fill(kSrcOff + uint64_t(i) * kLen, kLen, 1000 + uint32_t(i));
    ibv_sge sg = local_.sge(kSrcOff + uint64_t(i) * kLen, kLen);
    ibv_send_wr w;
    memset(&w, 0, sizeof(w));
    w.wr_id = uint64_t(i);
    w.opcode = IBV_WR_RDMA_WRITE;
    w.sg_list = &sg;
    w.num_sge = 1;
    w.send_flags = IBV_SEND_SIGNALED;
    w.wr.rdma.remote_addr = agent_->raddr(kTgtOff + uint64_t(i) * kLen);
    w.wr.rdma.rkey = agent_->rkey();
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(local_.qp.get(), &w, &bad), 0) << "WRITE " << i;
  }

  /// The next async event of our context within 10 s (poll() on its fd).
  std::optional<ibv_async_event> next_event() {
    ibv_context* ctx = local_.dev.ctx.get();
    pollfd p{ctx->async_fd, POLLIN, 0};
    if (poll(&p, 1, 10000) != 1) return std::nullopt;
    ibv_async_event e;
    if (ibv_get_async_event(ctx, &e) != 0) return std::nullopt;
    return e;
  }

  /// Completions must come in posting order, all successful.
  void expect_in_order(const std::vector<ibv_wc>& got, int* next) {
    for (const ibv_wc& wc : got) {
      EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
      EXPECT_EQ(wc.wr_id, uint64_t(*next)) << "completions out of order";
      ++*next;
    }
  }

  LocalEnd local_;
  std::unique_ptr<Agent> agent_;
};

TEST_F(SqdTest, DrainsWhatBeganHoldsWhatIsPostedAndResumesAtRts) {
  for (int i = 0; i < kBefore; ++i) ASSERT_NO_FATAL_FAILURE(post_write(i));
  ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_SQD;
  a.en_sqd_async_notify = 1;
  ASSERT_EQ(ibv_modify_qp(local_.qp.get(), &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY), 0);

  auto ev = next_event();
  ASSERT_TRUE(ev) << "no IBV_EVENT_SQ_DRAINED within 10 s";
  EXPECT_EQ(ev->event_type, IBV_EVENT_SQ_DRAINED) << ibv_event_type_str(ev->event_type);
  EXPECT_EQ(ev->element.qp, local_.qp.get());
  ibv_ack_async_event(&*ev);

  ibv_qp_attr q;
  ibv_qp_init_attr qi;
  ASSERT_EQ(ibv_query_qp(local_.qp.get(), &q, IBV_QP_STATE, &qi), 0);
  EXPECT_EQ(q.qp_state, IBV_QPS_SQD);

  // Drained: what began is complete; what had not waits. Posting is allowed.
  int next = 0;
  expect_in_order(drain_cq(local_.scq.get(), 50), &next);
  const int done_at_drain = next;
  for (int i = kBefore; i < kBefore + kDuring; ++i) ASSERT_NO_FATAL_FAILURE(post_write(i));
  EXPECT_TRUE(drain_cq(local_.scq.get(), 200).empty()) << "a WQE ran while the QP was drained";
  for (int i = kBefore; i < kBefore + kDuring; ++i)
    EXPECT_TRUE(agent_->expect(kTgtOff + uint64_t(i) * kLen, kLen, 400, kTgtOff + uint64_t(i) * kLen))
        << "WRITE " << i << " reached the target while the QP was drained";

  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  ASSERT_EQ(ibv_modify_qp(local_.qp.get(), &a, IBV_QP_STATE), 0);
  const size_t left = size_t(kBefore + kDuring - done_at_drain);
  auto rest = poll_n(local_.scq.get(), left);
  ASSERT_EQ(rest.size(), left);
  expect_in_order(rest, &next);
  for (int i = 0; i < kBefore + kDuring; ++i)
    EXPECT_TRUE(agent_->expect(kTgtOff + uint64_t(i) * kLen, kLen, 1000 + uint32_t(i))) << "WRITE " << i;
}

}  // namespace
}  // namespace uroce::test
