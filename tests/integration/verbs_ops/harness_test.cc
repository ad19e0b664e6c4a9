// The harness itself: a peer that dies or stops must turn into a prompt test
// failure (never a hang), and teardown must reap children in any state.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>

#include "support/verbs_harness.h"

namespace uroce::test {
namespace {

TEST(HarnessTest, PatternsAreSeededAndPositional) {
  uint8_t a[100], b[60];
  fill_pattern(a, sizeof(a), 7);
  fill_pattern(b, sizeof(b), 7, 40);  // a sub-range on its own
  EXPECT_EQ(memcmp(a + 40, b, sizeof(b)), 0);
  EXPECT_EQ(find_pattern_mismatch(a, sizeof(a), 7), -1);
  EXPECT_NE(find_pattern_mismatch(a, sizeof(a), 8), -1);
  a[77] ^= 1;
  EXPECT_EQ(find_pattern_mismatch(a, sizeof(a), 7), 77);
}

TEST(HarnessTest, ShadowedMemoryReportsEveryUnexpectedByte) {
  ShadowedMemory m;
  ASSERT_TRUE(m.allocate(4096));
  m.fill(0, 4096, 1);
  EXPECT_EQ(m.verify(), "");
  m.data()[100] ^= 0xff;  // "outside the target range"
  EXPECT_NE(m.verify(), "");
  m.accept(100, 1);
  EXPECT_EQ(m.verify(), "");
  m.expect(10, 10, 2);
  EXPECT_NE(m.verify(), "");
  m.expect(4090, 10, 2);  // out of range: a test bug, reported
  EXPECT_NE(m.verify().find("outside"), std::string::npos);
}

TEST(HarnessTest, ADeadAgentFailsCallsInsteadOfHanging) {
  EndConfig cfg;
  cfg.buf_bytes = 1u << 16;
  std::string err;
  auto agent = Agent::start(cfg, &err);
  ASSERT_TRUE(agent) << err;
  kill(agent->proc().pid(), SIGKILL);
  ibv_wc wc;
  EXPECT_EQ(agent->poll_recv(&wc, 100), -1);
  EXPECT_NE(agent->error(), "");
  EXPECT_EQ(agent->proc().wait_exit(), 128 + SIGKILL);
}

TEST(HarnessTest, ChannelReceiveIsBoundedAndTeardownReapsAStoppedChild) {
  pid_t pid;
  {
    auto p = PeerProcess::spawn([](Channel& ch) {
      int32_t v;
      return ch.recv_pod(&v) ? 0 : 1;  // waits for the parent
    });
    ASSERT_TRUE(p);
    pid = p->pid();
    int32_t v;
    EXPECT_FALSE(p->chan().recv_pod(&v, 50));  // nothing comes: times out
    ASSERT_TRUE(p->stop());
    EXPECT_TRUE(p->is_stopped());
  }  // destructor: SIGKILL + reap, even though it is stopped
  EXPECT_EQ(waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

}  // namespace
}  // namespace uroce::test
