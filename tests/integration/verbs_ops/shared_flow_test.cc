// Connected QPs of three processes whose paths all carry one flow label, as
// UCX sets up every QP (flow label 0xFFFFF): this process has two QPs, each
// connected to a QP in a child process of its own.
//
// Over the network link (the _udp variant) a flow's UDP source port comes
// from its flow label, so all these flows share the port (one per direction
// on one host) and their receiving sockets have the same four addresses:
// Linux hands every datagram of them to one socket, so some land in a
// process that does not own the QP they name. They must still reach their
// QP (contract/inbox.h); before, they were dropped, and an RC QP of
// another process ended in RETRY_EXC_ERR, a UC receive never completed.
// A destroyed RC QP's receiving socket goes to uroced for a while (its
// linger), and is then the socket bound last on its flow's addresses: the
// packets of the live flows that share them go to uroced, which must pass
// them on too (before, they were dropped for its 3 s, and the RC QPs beside
// it ended in RETRY_EXC_ERR). Over the intra-host link the same traffic
// checks that flow labels are accepted and change nothing.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "support/verbs_harness.h"

namespace uroce::test {
namespace {

constexpr uint32_t kFlowLabel = 0xFFFFF;

class SharedFlow : public ::testing::TestWithParam<ibv_qp_type> {
 protected:
  void SetUp() override {
    for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(open_pair(i));
    // Both pairs connect before any traffic: every receiving socket exists.
    for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(connect_pair(i));
  }

  void open_pair(int i) {
    EndConfig cfg;
    cfg.type = GetParam();
    cfg.buf_bytes = 1u << 20;
    cfg.flow_label = kFlowLabel;
    cfg.bg_seed = 10 + uint32_t(i);
    std::string err;
    ASSERT_TRUE(local_[i].open(cfg, &err)) << err;
    cfg.bg_seed = 20 + uint32_t(i);
    agent_[i] = Agent::start(cfg, &err);
    ASSERT_TRUE(agent_[i]) << err;
  }
  void connect_pair(int i) {
    std::string err;
    ASSERT_TRUE(agent_[i]->connect(local_[i].info())) << agent_[i]->error();
    ASSERT_TRUE(local_[i].connect(agent_[i]->info(), &err)) << err;
  }

  /// This process's QP i sends `len` bytes of pattern `seed` to its agent.
  void send_out(int i, uint32_t len, uint32_t seed) {
    SCOPED_TRACE(testing::Message() << "pair " << i << ", to the agent, " << len << " bytes");
    const uint64_t off = 4096;
    ASSERT_EQ(agent_[i]->post_recv(seed, {Seg{off, len}}), 0);
    local_[i].mem.fill(0, len, seed);
    ibv_sge sg = local_[i].sge(0, len);
    ibv_send_wr w{};
    w.wr_id = seed;
    w.opcode = IBV_WR_SEND;
    w.sg_list = &sg;
    w.num_sge = 1;
    w.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(local_[i].qp.get(), &w, &bad), 0);
    auto wc = poll_one(local_[i].scq.get());
    ASSERT_TRUE(wc) << "no send completion";
    ASSERT_EQ(wc->status, IBV_WC_SUCCESS) << wc_str(*wc);
    ibv_wc rwc;
    // Expect: the agent's receive completes with every byte.
    ASSERT_EQ(agent_[i]->poll_recv(&rwc), 1) << agent_[i]->error();
    ASSERT_EQ(rwc.status, IBV_WC_SUCCESS) << wc_str(rwc);
    EXPECT_EQ(rwc.byte_len, len);
    ASSERT_TRUE(agent_[i]->expect(off, len, seed));
    EXPECT_EQ(agent_[i]->verify(), "");
  }

  /// Agent i sends `len` bytes of pattern `seed` to this process's QP i.
  void send_in(int i, uint32_t len, uint32_t seed) {
    SCOPED_TRACE(testing::Message() << "pair " << i << ", from the agent, " << len << " bytes");
    const uint64_t off = 8192;
    ASSERT_EQ(local_[i].post_recv(seed, {local_[i].sge(off, len)}), 0);
    ASSERT_TRUE(agent_[i]->fill(0, len, seed));
    AgentSend s;
    s.wr_id = seed;
    s.sges = {Seg{0, len}};
    ASSERT_EQ(agent_[i]->post_send(s), 0) << agent_[i]->error();
    ibv_wc swc;
    ASSERT_EQ(agent_[i]->poll_send(&swc), 1) << agent_[i]->error();
    ASSERT_EQ(swc.status, IBV_WC_SUCCESS) << wc_str(swc);
    // Expect: this process's receive completes with every byte.
    auto wc = poll_one(local_[i].rcq.get());
    ASSERT_TRUE(wc) << "no receive completion";
    ASSERT_EQ(wc->status, IBV_WC_SUCCESS) << wc_str(*wc);
    EXPECT_EQ(wc->byte_len, len);
    local_[i].mem.expect(off, len, seed);
    EXPECT_EQ(local_[i].mem.verify(), "");
  }

  LocalEnd local_[3];
  std::unique_ptr<Agent> agent_[3];
};

TEST_P(SharedFlow, EveryQpGetsItsPacketsBothWays) {
  uint32_t seed = 100;
  for (uint32_t len : {1u, 1000u, 5000u, 65536u}) {
    for (int i = 0; i < 2; ++i) {
      ASSERT_NO_FATAL_FAILURE(send_out(i, len, ++seed));
      ASSERT_NO_FATAL_FAILURE(send_in(i, len, ++seed));
    }
  }
}

TEST_P(SharedFlow, AQpDestroyedBesideThemLeavesTheirPacketsFlowing) {
  // A third pair on the same flow label, used, and this side's QP destroyed:
  // over UDP its receiving socket now lingers in uroced.
  ASSERT_NO_FATAL_FAILURE(open_pair(2));
  ASSERT_NO_FATAL_FAILURE(connect_pair(2));
  ASSERT_NO_FATAL_FAILURE(send_out(2, 100, 50));
  ASSERT_NO_FATAL_FAILURE(send_in(2, 100, 51));
  local_[2].qp.reset();
  // Expect: the two other pairs go on as before, both ways, well within the
  // linger's 3 s (an RC QP here gives up after 7 x 67 ms without an answer).
  uint32_t seed = 200;
  for (uint32_t len : {1u, 5000u, 65536u}) {
    for (int i = 0; i < 2; ++i) {
      ASSERT_NO_FATAL_FAILURE(send_out(i, len, ++seed));
      ASSERT_NO_FATAL_FAILURE(send_in(i, len, ++seed));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RcAndUc, SharedFlow, ::testing::Values(IBV_QPT_RC, IBV_QPT_UC),
                         [](const auto& info) { return info.param == IBV_QPT_RC ? "Rc" : "Uc"; });

}  // namespace
}  // namespace uroce::test
