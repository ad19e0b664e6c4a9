// Completion channels woken from another process: this process arms its
// receive CQ, blocks (bounded) in poll() on the channel fd, and the peer's
// SEND wakes it; ibv_get_cq_event names the CQ and its context. One arm
// gives one event; an O_NONBLOCK channel with nothing queued says EAGAIN;
// a solicited-only arm ignores unsolicited SENDs and fires on a solicited one
// (ibv_req_notify_cq(3), ibv_get_cq_event(3)).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "support/verbs_harness.h"

namespace uroce::test {
namespace {

/// poll() on the channel fd; true if readable within timeout_ms.
bool readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

class CompChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EndConfig cfg;
    cfg.buf_bytes = 1u << 20;
    cfg.recv_channel = true;
    cfg.bg_seed = 5;
    std::string err;
    ASSERT_TRUE(local_.open(cfg, &err)) << err;
    cfg.recv_channel = false;
    cfg.bg_seed = 6;
    agent_ = Agent::start(cfg, &err);
    ASSERT_TRUE(agent_) << err;
    ASSERT_TRUE(agent_->connect(local_.info())) << agent_->error();
    ASSERT_TRUE(local_.connect(agent_->info(), &err)) << err;
    fd_ = local_.channel->fd;
  }

  AgentSend send_of(uint64_t id, uint32_t len, uint32_t seed, bool solicited) {
    EXPECT_TRUE(agent_->fill(0, len, seed));
    AgentSend s;
    s.wr_id = id;
    s.sges = {{0, len}};
    s.flags = IBV_SEND_SIGNALED | (solicited ? IBV_SEND_SOLICITED : 0);
    return s;
  }
  void finish(uint64_t id) {
    ASSERT_EQ(agent_->finish_send(), 0) << agent_->error();
    ibv_wc wc;
    ASSERT_EQ(agent_->poll_send(&wc), 1) << agent_->error();
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
    EXPECT_EQ(wc.wr_id, id);
  }
  // Sends synchronously: when this returns the receive completion exists.
  void send_now(uint64_t id, uint32_t len, uint32_t seed, bool solicited) {
    ASSERT_TRUE(agent_->post_send_nowait(send_of(id, len, seed, solicited))) << agent_->error();
    ASSERT_NO_FATAL_FAILURE(finish(id));
  }
  // The event must name our receive CQ and its context; acks it. Called
  // once poll() said readable; O_NONBLOCK keeps it bounded regardless.
  void get_event() {
    ibv_cq* cq = nullptr;
    void* cq_ctx = nullptr;
    const int fl = fcntl(fd_, F_GETFL);
    ASSERT_EQ(fcntl(fd_, F_SETFL, fl | O_NONBLOCK), 0);
    const int rc = ibv_get_cq_event(local_.channel.get(), &cq, &cq_ctx);
    const int e = errno;
    ASSERT_EQ(fcntl(fd_, F_SETFL, fl), 0);
    ASSERT_EQ(rc, 0) << strerror(e);
    EXPECT_EQ(cq, local_.rcq.get());
    EXPECT_EQ(cq_ctx, static_cast<void*>(&local_));
    ibv_ack_cq_events(cq, 1);
  }
  void expect_nothing_queued() {
    const int fl = fcntl(fd_, F_GETFL);
    ASSERT_EQ(fcntl(fd_, F_SETFL, fl | O_NONBLOCK), 0);
    ibv_cq* cq = nullptr;
    void* cq_ctx = nullptr;
    errno = 0;
    EXPECT_EQ(ibv_get_cq_event(local_.channel.get(), &cq, &cq_ctx), -1);
    EXPECT_EQ(errno, EAGAIN);
    ASSERT_EQ(fcntl(fd_, F_SETFL, fl), 0);
  }
  void expect_recv(uint64_t id, uint32_t len, uint32_t seed, uint64_t off) {
    auto wc = poll_one(local_.rcq.get());
    ASSERT_TRUE(wc) << "no receive completion";
    EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << wc_str(*wc);
    EXPECT_EQ(wc->wr_id, id) << wc_str(*wc);
    EXPECT_EQ(wc->byte_len, len) << wc_str(*wc);
    local_.mem.expect(off, len, seed);
  }

  LocalEnd local_;
  std::unique_ptr<Agent> agent_;
  int fd_ = -1;
};

TEST_F(CompChannelTest, SendFromAnotherProcessWakesABlockedPoll) {
  ASSERT_EQ(local_.post_recv(1, {local_.sge(0, 4096)}), 0);
  ASSERT_EQ(local_.post_recv(2, {local_.sge(8192, 4096)}), 0);
  ASSERT_NO_FATAL_FAILURE(expect_nothing_queued());

  ASSERT_EQ(ibv_req_notify_cq(local_.rcq.get(), 0), 0);
  // The peer waits a little before sending, so that we are blocked in poll().
  AgentSend s = send_of(1, 3000, 71, false);
  s.delay_ms = 20;
  ASSERT_TRUE(agent_->post_send_nowait(s)) << agent_->error();
  ASSERT_TRUE(readable(fd_, kWaitMs)) << "the SEND did not wake the completion channel";
  ASSERT_NO_FATAL_FAILURE(get_event());
  ASSERT_NO_FATAL_FAILURE(finish(1));
  ASSERT_NO_FATAL_FAILURE(expect_recv(1, 3000, 71, 0));
  // One arm, one event.
  ASSERT_NO_FATAL_FAILURE(expect_nothing_queued());

  // Not re-armed: the next completion arrives silently.
  ASSERT_NO_FATAL_FAILURE(send_now(2, 100, 72, false));
  EXPECT_FALSE(readable(fd_, 0)) << "event without a new ibv_req_notify_cq";
  ASSERT_NO_FATAL_FAILURE(expect_recv(2, 100, 72, 8192));
  EXPECT_EQ(local_.mem.verify(), "");
}

TEST_F(CompChannelTest, SolicitedOnlyArmIgnoresUnsolicitedSends) {
  ASSERT_EQ(local_.post_recv(1, {local_.sge(0, 4096)}), 0);
  ASSERT_EQ(local_.post_recv(2, {local_.sge(8192, 4096)}), 0);
  ASSERT_EQ(ibv_req_notify_cq(local_.rcq.get(), 1), 0);

  ASSERT_NO_FATAL_FAILURE(send_now(1, 1000, 81, false));
  // The completion exists (the sender's RC completion says it was placed),
  // but an unsolicited one must not wake a solicited-only arm.
  EXPECT_FALSE(readable(fd_, 50)) << "an unsolicited SEND woke a solicited-only arm";

  AgentSend s = send_of(2, 2000, 82, true);
  s.delay_ms = 20;
  ASSERT_TRUE(agent_->post_send_nowait(s)) << agent_->error();
  ASSERT_TRUE(readable(fd_, kWaitMs)) << "the solicited SEND did not wake the channel";
  ASSERT_NO_FATAL_FAILURE(get_event());
  ASSERT_NO_FATAL_FAILURE(finish(2));
  ASSERT_NO_FATAL_FAILURE(expect_recv(1, 1000, 81, 0));
  ASSERT_NO_FATAL_FAILURE(expect_recv(2, 2000, 82, 8192));
  ASSERT_NO_FATAL_FAILURE(expect_nothing_queued());
  EXPECT_EQ(local_.mem.verify(), "");
}

// ibv_get_cq_event(3) blocks in a read of the channel's fd; a signal ends
// the wait with -1 and EINTR, as rdma-core's read() of the kernel's fd does
// (qperf's test child stops at its SIGALRM so). A watchdog thread shuts the
// fd down after 5 s, so a wait that ignores the signal fails the test
// instead of hanging it.
TEST_F(CompChannelTest, ASignalEndsABlockedWaitWithEintr) {
  ASSERT_EQ(ibv_req_notify_cq(local_.rcq.get(), 0), 0);
  struct sigaction sa {
  }, old{};
  sa.sa_handler = [](int) {};
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART
  ASSERT_EQ(sigaction(SIGALRM, &sa, &old), 0);
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    for (int i = 0; i < 500 && !done.load(); ++i) usleep(10000);
    if (!done.load()) shutdown(fd_, SHUT_RDWR);
  });
  itimerval t{};
  t.it_value.tv_usec = 50000;
  ASSERT_EQ(setitimer(ITIMER_REAL, &t, nullptr), 0);
  ibv_cq* cq = nullptr;
  void* cq_ctx = nullptr;
  errno = 0;
  const int rc = ibv_get_cq_event(local_.channel.get(), &cq, &cq_ctx);
  const int e = errno;
  done = true;
  watchdog.join();
  sigaction(SIGALRM, &old, nullptr);
  EXPECT_EQ(rc, -1);
  EXPECT_EQ(e, EINTR) << strerror(e);
}

}  // namespace
}  // namespace uroce::test
