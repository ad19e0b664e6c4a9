// Case 10: uroced killed with SIGKILL. Every open context of a client gets
// IBV_EVENT_DEVICE_FATAL on its async fd within a bounded time, and nothing
// hangs afterwards: the data path, control verbs (which now fail with an
// error) and tear-down all return.
//
// Rules: IBA vol. 1 ch. 11.6 (asynchronous events: the unaffiliated "Local
// Catastrophic Error" = IBV_EVENT_DEVICE_FATAL), ibv_get_async_event(3)
// ("IBV_EVENT_DEVICE_FATAL CA is in FATAL state"; the async fd may be made
// non-blocking and polled); DESIGN.md invariants 4 and 5 (nobody is wedged,
// every wait is bounded).
//
// Its own executable, with its own daemon: the test sets a private
// UROCE_DAEMON_NAME before the first verbs call, so the library starts a
// uroced no other test uses, and that is the one it kills.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

constexpr int kBoundMs = 5000;

/// Runs `fn` on a thread and fails (ending the process, since a hung thread
/// cannot be joined) if it has not returned within kBoundMs.
void expect_returns(const char* what, std::function<void()> fn) {
  std::packaged_task<void()> task(std::move(fn));
  auto done = task.get_future();
  std::thread t(std::move(task));
  if (done.wait_for(std::chrono::milliseconds(kBoundMs)) != std::future_status::ready) {
    ADD_FAILURE() << what << " did not return within " << kBoundMs << " ms after uroced died";
    fprintf(stderr, "%s hangs; exiting\n", what);
    std::_Exit(1);
  }
  t.join();
}

TEST(DaemonDeath, ClientGetsDeviceFatalAndNothingHangs) {
  const std::string name = "fault-daemon-death-" + std::to_string(getpid());
  ASSERT_EQ(setenv("UROCE_DAEMON_NAME", name.c_str(), 1), 0);

  ibv_context* ctx = open_lo();  // starts our private uroced
  ASSERT_NE(ctx, nullptr) << strerror(errno);
  ibv_context* ctx2 = open_lo();  // a second context of the same process hears it too
  ASSERT_NE(ctx2, nullptr) << strerror(errno);
  auto pair = std::make_unique<RcPair>();
  ASSERT_TRUE(make_rc_pair(ctx, pair.get()));
  // Healthy before.
  ibv_sge r = pair->b.sge(0, 64);
  ASSERT_EQ(post_recv(pair->b.qp, 1, &r, 1), 0);
  ibv_sge s = pair->a.sge(0, 64);
  ASSERT_EQ(post_send(pair->a.qp, 1, IBV_WR_SEND, &s, 1), 0);
  auto ok = poll_one(pair->a.send_cq);
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, IBV_WC_SUCCESS);

  pid_t daemon = -1;
  for (int64_t deadline = now_ms() + kBoundMs; daemon <= 0 && now_ms() < deadline;) {
    daemon = find_uroced(name);
    if (daemon <= 0) usleep(10000);
  }
  ASSERT_GT(daemon, 0) << "no uroced with UROCE_DAEMON_NAME=" << name << " in /proc";
  ASSERT_EQ(kill(daemon, SIGKILL), 0) << strerror(errno);

  // Each context's async fd reports DEVICE_FATAL (non-blocking + poll, as
  // ibv_get_async_event(3) shows).
  for (ibv_context* c : {ctx, ctx2}) {
    int fl = fcntl(c->async_fd, F_GETFL);
    ASSERT_EQ(fcntl(c->async_fd, F_SETFL, fl | O_NONBLOCK), 0);
    bool fatal = false;
    for (int64_t deadline = now_ms() + kBoundMs; !fatal && now_ms() < deadline;) {
      pollfd p{c->async_fd, POLLIN, 0};
      if (poll(&p, 1, int(std::max<int64_t>(1, deadline - now_ms()))) != 1) continue;
      ibv_async_event ev{};
      if (ibv_get_async_event(c, &ev) != 0) continue;
      fatal = ev.event_type == IBV_EVENT_DEVICE_FATAL;
      ibv_ack_async_event(&ev);
    }
    EXPECT_TRUE(fatal) << "no IBV_EVENT_DEVICE_FATAL within " << kBoundMs << " ms";
  }

  // Nothing hangs. The data path needs no daemon; control verbs that need
  // one fail with an error instead of waiting for an answer that never comes.
  expect_returns("ibv_poll_cq", [&] {
    ibv_wc wc[4];
    EXPECT_GE(ibv_poll_cq(pair->a.send_cq, 4, wc), 0);
  });
  expect_returns("ibv_post_send + poll", [&] {
    ibv_sge s2 = pair->a.sge(0, 64);
    int rc = post_send(pair->a.qp, 2, IBV_WR_RDMA_WRITE, &s2, 1, pair->b.addr(1024), pair->b.mr->rkey);
    if (rc == 0) {
      auto wc = poll_one(pair->a.send_cq, kBoundMs / 2);
      EXPECT_TRUE(wc) << "a posted WR never completed";
    }
  });
  expect_returns("ibv_create_qp", [&] {
    ibv_qp_init_attr ia{};
    ia.send_cq = pair->a.send_cq;
    ia.recv_cq = pair->a.recv_cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = 1;
    ia.cap.max_recv_wr = 1;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    errno = 0;
    ibv_qp* q = ibv_create_qp(pair->a.pd, &ia);
    if (q) {
      ibv_destroy_qp(q);
    } else {
      EXPECT_NE(errno, 0) << "ibv_create_qp failed without errno";
    }
  });
  expect_returns("ibv_reg_mr", [&] {
    std::vector<uint8_t> mem(4096);
    errno = 0;
    ibv_mr* m = ibv_reg_mr(pair->a.pd, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE);
    if (m) {
      ibv_dereg_mr(m);
    } else {
      EXPECT_NE(errno, 0) << "ibv_reg_mr failed without errno";
    }
  });
  expect_returns("ibv_open_device", [&] {
    ibv_context* c3 = open_lo();
    if (c3) ibv_close_device(c3);
  });
  expect_returns("tear-down", [&] {
    pair.reset();  // destroys QPs, MRs, CQs, PDs
    EXPECT_EQ(ibv_close_device(ctx2), 0);
    EXPECT_EQ(ibv_close_device(ctx), 0);
  });
}

}  // namespace
}  // namespace uroce::fault
