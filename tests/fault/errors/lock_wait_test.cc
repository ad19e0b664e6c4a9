// A QP's send-queue lock is held while its work request waits for uroced
// (the first SEND to a peer resolves the peer's QP number through it); a
// second thread posting on the same QP meanwhile must sleep, not spin: the
// lock guards system calls and waits, so it is a mutex, never a spin lock
// (STYLE.md; issue 14 found the network link's socket set-up and its
// identification probe under spin locks too: core/qp.h has the lock order).
//
// uroced is stopped (SIGSTOP) for the wait, so the test has a daemon of its
// own, in its own executable.
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

double thread_cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

TEST(LockWait, AThreadWaitingForABusySendQueueSleeps) {
  const std::string name = "fault-lock-wait-" + std::to_string(getpid());
  ASSERT_EQ(setenv("UROCE_DAEMON_NAME", name.c_str(), 1), 0);
  ibv_context* ctx = open_lo();
  ASSERT_NE(ctx, nullptr) << strerror(errno);
  auto pair = std::make_unique<RcPair>();
  ASSERT_TRUE(make_rc_pair(ctx, pair.get()));
  ibv_sge r0 = pair->b.sge(0, 64), r1 = pair->b.sge(64, 64);
  ASSERT_EQ(post_recv(pair->b.qp, 1, &r0, 1), 0);
  ASSERT_EQ(post_recv(pair->b.qp, 2, &r1, 1), 0);
  pid_t daemon = -1;
  for (int64_t deadline = now_ms() + kWaitMs; daemon <= 0 && now_ms() < deadline;) {
    daemon = find_uroced(name);
    if (daemon <= 0) usleep(10000);
  }
  ASSERT_GT(daemon, 0);
  ASSERT_EQ(kill(daemon, SIGSTOP), 0);

  // A: the QP's first SEND, which waits for uroced to name the peer.
  std::atomic<int> a_rc{-1}, b_rc{-1};
  std::atomic<bool> a_started{false};
  std::thread a([&] {
    ibv_sge s = pair->a.sge(0, 64);
    a_started = true;
    a_rc = post_send(pair->a.qp, 1, IBV_WR_SEND, &s, 1);
  });
  while (!a_started) usleep(1000);
  usleep(200000);  // A is inside, holding the send queue
  // B: another SEND on the same QP, which waits for A.
  double b_cpu_ms = 0, b_wall_ms = 0;
  std::thread b([&] {
    ibv_sge s = pair->a.sge(64, 64);
    const double c0 = thread_cpu_ms();
    const int64_t t0 = now_ms();
    b_rc = post_send(pair->a.qp, 2, IBV_WR_SEND, &s, 1);
    b_cpu_ms = thread_cpu_ms() - c0;
    b_wall_ms = double(now_ms() - t0);
  });
  usleep(800000);
  ASSERT_EQ(kill(daemon, SIGCONT), 0);
  a.join();
  b.join();
  EXPECT_EQ(a_rc, 0);
  EXPECT_EQ(b_rc, 0);
  // Expect: B waited (~0.8 s) and spent almost none of it on a CPU.
  EXPECT_GE(b_wall_ms, 300.0) << "B did not wait for A: nothing was tested";
  EXPECT_LT(b_cpu_ms, 0.2 * b_wall_ms)
      << "B spun for " << b_cpu_ms << " ms of its " << b_wall_ms << " ms wait";
  for (uint64_t id : {1, 2}) {
    auto wc = poll_one(pair->a.send_cq);
    ASSERT_TRUE(wc);
    EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc->wr_id, id);
  }
  pair.reset();
  ibv_close_device(ctx);
}

}  // namespace
}  // namespace uroce::fault
