// ibv_destroy_qp(3) takes the QP's completions still queued in its CQs with
// it, as rdma-core's mlx5 provider does (__mlx5_cq_clean): a program that
// destroys a QP and then drains a CQ it shares with others sees no
// completion of the QP that is gone. libfabric's rxm relies on it (it closes
// a connection's endpoint, then drains the CQ and reposts every receive it
// finds on that endpoint).
#include <gtest/gtest.h>

#include <cstring>

#include "support/verbs_harness.h"

namespace uroce::test {
namespace {

TEST(QpDestroy, TheQueuedCompletionsOfADestroyedQpGoWithIt) {
  EndConfig cfg;
  cfg.buf_bytes = 1u << 20;
  LocalEnd local;
  std::string err;
  ASSERT_TRUE(local.open(cfg, &err)) << err;
  std::unique_ptr<Agent> agent = Agent::start(cfg, &err);
  ASSERT_TRUE(agent) << err;
  ASSERT_TRUE(agent->connect(local.info())) << agent->error();
  ASSERT_TRUE(local.connect(agent->info(), &err)) << err;

  // Two SENDs land in two posted receives; their completions stay queued.
  for (uint64_t i = 0; i < 2; ++i) ASSERT_EQ(local.post_recv(i, {local.sge(i * 4096, 64)}), 0);
  for (uint64_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(agent->fill(0, 64, 7));
    AgentSend s;
    s.wr_id = i;
    s.sges = {{0, 64}};
    ASSERT_EQ(agent->post_send(s), 0) << agent->error();
    ibv_wc wc;
    ASSERT_EQ(agent->poll_send(&wc), 1) << agent->error();  // acknowledged: the receive completed
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
  }
  local.qp.reset();  // ibv_destroy_qp, with both completions unpolled
  ibv_wc wc[4];
  EXPECT_EQ(ibv_poll_cq(local.rcq.get(), 4, wc), 0) << "a completion of the destroyed QP was left in its CQ";
}

}  // namespace
}  // namespace uroce::test
