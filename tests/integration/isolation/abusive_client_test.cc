// uroced under a hostile client of its own user (issue 15): truncated,
// oversized and out-of-order messages, descriptors of the wrong kind, numbers
// that point outside what the client registered, replies never read, 10,000
// connections, and more contexts and QPs than a client may hold. Throughout,
// a well-behaved client is served; afterwards uroced holds no more
// descriptors than before and its memory is back within a bound.
//
// The test starts its own uroced (a child of this process, so that it can
// look at its /proc entries) under a private name, and talks the control
// protocol (contract/control_protocol.h) on raw sockets, as an attacker would.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/unix_socket.h"
#include "contract/control_protocol.h"
#include "contract/limits.h"
#include "contract/shm_layout.h"

using namespace uroce;
using control::MsgType;
using control::Reply;
using control::Request;

namespace {

constexpr int kWaitMs = 5000;  // bound on every wait for uroced

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif
/// How much uroced's resident memory may grow over a test: what it freed
/// again stays with the allocator, within this (ASan adds shadow memory and
/// its allocator's own bookkeeping).
constexpr long kRssGrowthKib = (kSanitized ? 192 : 64) * 1024;

class Daemon {
 public:
  Daemon() {
    name_ = "abusive-" + std::to_string(getpid());
    setenv("UROCE_DAEMON_NAME", name_.c_str(), 1);
    const char* path = getenv("UROCE_UROCED");
    pid_ = fork();
    if (pid_ == 0) {
      int null = open("/dev/null", O_RDWR);
      dup2(null, 0);
      dup2(null, 1);
      setenv("UROCED_IDLE_MS", "500", 1);
      // Under ASan (the sanitizer tree) freed memory waits in a quarantine
      // of 256 MiB by default, which would read as growth: keep it small.
      if (kSanitized) setenv("ASAN_OPTIONS", "quarantine_size_mb=8:thread_local_quarantine_size_kb=256", 1);
      execl(path ? path : "uroced", "uroced", nullptr);
      _exit(127);
    }
  }
  ~Daemon() {
    if (pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  bool alive() const { return waitpid(pid_, nullptr, WNOHANG) == 0; }
  /// Descriptors uroced holds now.
  int fds() const {
    int n = 0;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid_) + "/fd", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
      ++n;
    return n;
  }
  /// Its resident memory, in KiB.
  long rss_kib() const {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("VmRSS:", 0) == 0) return strtol(line.c_str() + 6, nullptr, 10);
    return -1;
  }
  /// Waits (bounded) for uroced to exit by itself; true if it did, with status 0.
  bool exited_by_itself(int ms) {
    for (uint64_t end = now_ns() + uint64_t(ms) * 1000000; now_ns() < end; usleep(10000)) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(st) && WEXITSTATUS(st) == 0;
      }
    }
    return false;
  }

 private:
  std::string name_;
  pid_t pid_ = -1;
};

/// A connection to the test's uroced (-1 if it cannot be made within the bound).
int dial() {
  sockaddr_un a;
  socklen_t len = make_abstract_addr(control::daemon_socket_name(), &a);
  for (uint64_t end = now_ns() + uint64_t(kWaitMs) * 1000000; now_ns() < end; usleep(5000)) {
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (connect(s, reinterpret_cast<sockaddr*>(&a), len) == 0) return s;
    close(s);
  }
  return -1;
}

Request request(MsgType t) {
  Request r{};
  r.type = uint32_t(t);
  r.version = control::kProtoVersion;
  r.pid = getpid();
  return r;
}

/// One request and its reply. Returns the reply's status, or -1 if the
/// connection ended (or nothing came within the bound); `fd_out` gets a passed fd.
int ask(int s, const Request& r, Reply* rep = nullptr, int pass_fd = -1, int* fd_out = nullptr) {
  if (send_msg_fd(s, &r, sizeof(r), pass_fd) < 0) return -1;
  static Reply scratch;
  Reply* out = rep ? rep : &scratch;
  int fd = -1;
  ssize_t n = recv_msg_fd(s, out, sizeof(*out), &fd, kWaitMs);
  if (fd_out)
    *fd_out = fd;
  else if (fd >= 0)
    close(fd);
  if (n < ssize_t(offsetof(Reply, devices))) return -1;
  return out->status;
}

/// True once uroced has closed connection `s` (within the bound).
bool closed_by_daemon(int s) {
  char b[sizeof(Reply)];
  for (;;) {
    ssize_t n = recv_msg_fd(s, b, sizeof(b), nullptr, kWaitMs);
    if (n == 0 || n == -ECONNRESET) return true;
    if (n < 0) return false;  // timed out: still open
  }
}

/// A context segment as the library makes one: a memfd sealed against shrinking.
int segment_fd(bool seal = true, size_t size = 1 << 20) {
  int fd = memfd_create("abusive-seg", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_EQ(ftruncate(fd, off_t(size)), 0);
  const uint64_t magic = core::kSegMagic;
  EXPECT_EQ(pwrite(fd, &magic, sizeof(magic), 0), ssize_t(sizeof(magic)));
  if (seal) EXPECT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  return fd;
}

/// A well-behaved client: hello, a context, a QP others can resolve.
struct GoodClient {
  int s = -1;
  int seg = -1;
  uint32_t ctx = 0, qpn = 0;
  void start() {
    s = dial();
    ASSERT_GE(s, 0);
    ASSERT_EQ(ask(s, request(MsgType::kHello)), 0);
    seg = segment_fd();
    Reply rep;
    ASSERT_EQ(ask(s, request(MsgType::kRegisterCtx), &rep, seg), 0);
    ctx = rep.ctx_id;
    Request r = request(MsgType::kAllocQpn);
    r.ctx_id = ctx;
    r.off = 4096;
    ASSERT_EQ(ask(s, r, &rep), 0);
    qpn = rep.qpn;
  }
  /// Still served: a ping, and its QP resolves to its context.
  void check(const char* after) {
    SCOPED_TRACE(after);
    EXPECT_EQ(ask(s, request(MsgType::kPing)), 0);
    Request r = request(MsgType::kResolveQpn);
    r.qpn = qpn;
    Reply rep;
    int fd = -1;
    EXPECT_EQ(ask(s, r, &rep, -1, &fd), 0);
    EXPECT_EQ(rep.ctx_id, ctx);
    EXPECT_GE(fd, 0);
    if (fd >= 0) close(fd);
  }
  ~GoodClient() {
    if (s >= 0) close(s);
    if (seg >= 0) close(seg);
  }
};

class AbusiveClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The daemon under test holds up to thousands of descriptors; so may we.
    rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 16384);
      setrlimit(RLIMIT_NOFILE, &rl);
    }
    ASSERT_GT(d.pid(), 0);
    good.start();
    base_fds = d.fds();
    base_rss = d.rss_kib();
  }
  void TearDown() override {
    good.check("the end");
    EXPECT_TRUE(d.alive());
    // Everything the abuser made uroced hold is gone again.
    int fds = 0;
    for (uint64_t end = now_ns() + uint64_t(kWaitMs) * 1000000; now_ns() < end; usleep(20000))
      if ((fds = d.fds()) <= base_fds) break;
    EXPECT_LE(fds, base_fds) << "uroced holds descriptors the abuser left";
    const long rss = d.rss_kib();
    EXPECT_LT(rss - base_rss, 64 * 1024)
        << "uroced's memory grew from " << base_rss << " to " << rss << " KiB";
    close(good.s);
    good.s = -1;
    EXPECT_TRUE(d.exited_by_itself(10000)) << "uroced did not exit once idle";
  }
  Daemon d;
  GoodClient good;
  int base_fds = 0;
  long base_rss = 0;
};

TEST_F(AbusiveClientTest, TruncatedAndOversizedMessagesEndTheConnection) {
  Request r = request(MsgType::kPing);
  for (size_t len : {size_t(1), size_t(4), sizeof(Request) - 1}) {
    int s = dial();
    ASSERT_GE(s, 0);
    ASSERT_EQ(send_msg_fd(s, &r, len, -1), ssize_t(len));
    EXPECT_TRUE(closed_by_daemon(s)) << len << " bytes";
    close(s);
  }
  std::vector<uint8_t> big(64 << 10, 0x41);
  memcpy(big.data(), &r, sizeof(r));
  for (size_t len : {sizeof(Request) + 1, sizeof(Request) + 64, big.size()}) {
    int s = dial();
    ASSERT_GE(s, 0);
    int fd = segment_fd();  // with a descriptor too: it must not stay in uroced
    ASSERT_EQ(send_msg_fd(s, big.data(), len, fd), ssize_t(len));
    close(fd);
    EXPECT_TRUE(closed_by_daemon(s)) << len << " bytes";
    close(s);
  }
  good.check("malformed messages");
}

TEST_F(AbusiveClientTest, OutOfOrderAndForeignRequestsFail) {
  int s = dial();
  ASSERT_GE(s, 0);
  Request r = request(MsgType::kAllocQpn);  // before any context
  r.ctx_id = good.ctx;                      // ... and naming another client's
  r.off = 4096;
  EXPECT_EQ(ask(s, r), EINVAL);
  r = request(MsgType::kAllocKey);
  r.ctx_id = good.ctx;
  r.slot = 3;
  EXPECT_EQ(ask(s, r), EINVAL);
  r = request(MsgType::kFreeQpn);  // another client's QP: ignored (posted: no reply)
  r.qpn = good.qpn;
  EXPECT_EQ(send_msg_fd(s, &r, sizeof(r), -1), ssize_t(sizeof(r)));
  r = request(MsgType::kUnregisterCtx);  // another client's context: ignored
  r.ctx_id = good.ctx;
  EXPECT_EQ(ask(s, r), 0);
  r = request(MsgType::kHello);
  r.version = 999;
  EXPECT_EQ(ask(s, r), EPROTO);
  r = request(MsgType(77));
  EXPECT_EQ(ask(s, r), EINVAL);
  good.check("requests naming its QP and context");
  close(s);
}

TEST_F(AbusiveClientTest, WrongDescriptorsAndOffsetsAreRefused) {
  int s = dial();
  ASSERT_GE(s, 0);
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  int udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int unsealed = segment_fd(false);
  int tiny = segment_fd(true, 8);
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  int wsealed = segment_fd();
  ASSERT_EQ(fcntl(wsealed, F_ADD_SEALS, F_SEAL_WRITE), 0);
  for (int fd : {-1, p[0], udp, unsealed, tiny, devnull, wsealed}) {
    EXPECT_EQ(ask(s, request(MsgType::kRegisterCtx), nullptr, fd), EINVAL) << "fd " << fd;
  }
  // A descriptor with a request that takes none, and a linger without a UDP peer.
  EXPECT_EQ(ask(s, request(MsgType::kPing), nullptr, p[0]), 0);
  EXPECT_EQ(ask(s, request(MsgType::kLinger), nullptr, p[1]), 0);
  EXPECT_EQ(ask(s, request(MsgType::kLinger), nullptr, udp), 0);
  for (int fd : {p[0], p[1], udp, unsealed, tiny, devnull, wsealed}) close(fd);

  // A QP outside its own segment: uroced stores into the QP when the
  // client goes, so it must not accept one it could not store into.
  int seg = segment_fd();
  Reply rep;
  ASSERT_EQ(ask(s, request(MsgType::kRegisterCtx), &rep, seg), 0);
  close(seg);
  Request r = request(MsgType::kAllocQpn);
  r.ctx_id = rep.ctx_id;
  for (uint64_t off : {uint64_t(0), uint64_t(8), uint64_t(1) << 20, (uint64_t(1) << 20) - 64,
                       uint64_t(1) << 40, ~uint64_t(0) - 63, core::kSegReserveBytes}) {
    r.off = off;
    EXPECT_EQ(ask(s, r), EINVAL) << "offset " << off;
  }
  r.off = (1 << 20) - 128;  // the last place a QpShm fits
  EXPECT_EQ(ask(s, r), 0);
  close(s);  // uroced marks that QP dead: inside the segment
  good.check("wrong descriptors");
}

TEST_F(AbusiveClientTest, AClientThatNeverReadsIsDropped) {
  int s = dial();
  ASSERT_GE(s, 0);
  Request r = request(MsgType::kHello);  // the largest reply
  int sent = 0;
  for (; sent < 10000; ++sent)
    if (send(s, &r, sizeof(r), MSG_DONTWAIT | MSG_NOSIGNAL) != ssize_t(sizeof(r))) break;
  EXPECT_GT(sent, 0);
  good.check("a client that never reads");  // uroced did not block on it
  close(s);
}

TEST_F(AbusiveClientTest, TenThousandConnections) {
  for (int i = 0; i < 10000; ++i) {
    int s = dial();
    ASSERT_GE(s, 0) << "connection " << i;
    close(s);
  }
  good.check("10,000 connections one after another");
  // Held at once: one process gets a bounded number; the rest are closed.
  std::vector<int> held;
  int refused = 0;
  for (int i = 0; i < 1000; ++i) {
    int s = dial();
    ASSERT_GE(s, 0);
    held.push_back(s);
  }
  for (int s : held) {
    Reply rep;
    if (ask(s, request(MsgType::kPing), &rep) != 0) ++refused;
  }
  EXPECT_GE(refused, 1000 - 64);
  good.check("1,000 connections held by one process");
  for (int s : held) close(s);
}

TEST_F(AbusiveClientTest, PerClientLimits) {
  int s = dial();
  ASSERT_GE(s, 0);
  int seg = segment_fd();
  Reply rep;
  std::vector<uint32_t> ctxs;
  int st = 0;
  for (int i = 0; i < 2000 && st == 0; ++i) {
    st = ask(s, request(MsgType::kRegisterCtx), &rep, seg);
    if (st == 0) ctxs.push_back(rep.ctx_id);
  }
  EXPECT_EQ(st, ENOMEM) << "contexts past a client's share";
  EXPECT_EQ(ctxs.size(), 1024u);
  // Unregistering gives them back.
  Request r = request(MsgType::kUnregisterCtx);
  for (size_t i = 1; i < ctxs.size(); ++i) {
    r.ctx_id = ctxs[i];
    ASSERT_EQ(ask(s, r), 0);
  }
  ASSERT_EQ(ask(s, request(MsgType::kRegisterCtx), &rep, seg), 0);
  close(seg);

  r = request(MsgType::kAllocQpn);
  r.ctx_id = ctxs[0];
  r.off = 4096;
  const uint32_t share = core::kLimits.max_qp + core::kLimits.max_srq;
  uint32_t n = 0;
  for (; n < share + 10; ++n)
    if ((st = ask(s, r, &rep)) != 0) break;
  EXPECT_EQ(n, share);
  EXPECT_EQ(st, ENOMEM) << "QPs past a client's share";
  good.check("a client at its limits");
  close(s);  // all of it goes with the connection
}

}  // namespace
