#include "fault/errors/fault_harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#ifndef UROCE_FAULT_PEER_PATH
#error "UROCE_FAULT_PEER_PATH (path of fault_errors_peer) must be defined by the build"
#endif

namespace uroce::fault {

int64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

ibv_context* open_lo() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) return nullptr;
  ibv_context* ctx = nullptr;
  for (int i = 0; i < n; ++i) {
    if (strcmp(ibv_get_device_name(list[i]), kDeviceName) == 0) {
      ctx = ibv_open_device(list[i]);
      break;
    }
  }
  ibv_free_device_list(list);
  if (!ctx && errno == 0) errno = ENODEV;
  return ctx;
}

ibv_gid lo_gid(ibv_context* ctx) {
  ibv_gid g{};
  if (ibv_query_gid(ctx, 1, kGidIndex, &g) != 0) memset(&g, 0, sizeof(g));
  return g;
}

std::optional<ibv_wc> poll_one(ibv_cq* cq, int timeout_ms) {
  const int64_t deadline = now_ms() + timeout_ms;
  for (;;) {
    ibv_wc wc{};
    int n = ibv_poll_cq(cq, 1, &wc);
    if (n == 1) return wc;
    if (n < 0 || now_ms() >= deadline) return std::nullopt;
    usleep(50);
  }
}

std::vector<ibv_wc> poll_n(ibv_cq* cq, size_t n, int timeout_ms) {
  std::vector<ibv_wc> out;
  const int64_t deadline = now_ms() + timeout_ms;
  while (out.size() < n) {
    ibv_wc wc[16];
    int got = ibv_poll_cq(cq, int(std::min<size_t>(16, n - out.size())), wc);
    if (got < 0) break;
    out.insert(out.end(), wc, wc + got);
    if (got == 0) {
      if (now_ms() >= deadline) break;
      usleep(50);
    }
  }
  return out;
}

std::vector<ibv_wc> poll_for(ibv_cq* cq, int ms) {
  std::vector<ibv_wc> out;
  const int64_t deadline = now_ms() + ms;
  while (now_ms() < deadline) {
    ibv_wc wc[16];
    int got = ibv_poll_cq(cq, 16, wc);
    if (got < 0) break;
    out.insert(out.end(), wc, wc + got);
    if (got == 0) usleep(200);
  }
  return out;
}

int to_init(ibv_qp* qp, unsigned qp_access) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags = qp_access;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

int to_rtr(ibv_qp* qp, uint32_t dest_qpn, const ibv_gid& dgid, uint8_t min_rnr_timer) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dest_qpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = min_rnr_timer;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = dgid;
  a.ah_attr.grh.sgid_index = kGidIndex;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.port_num = 1;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

int to_rts(ibv_qp* qp, uint8_t timeout, uint8_t retry_cnt, uint8_t rnr_retry) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = timeout;
  a.retry_cnt = retry_cnt;
  a.rnr_retry = rnr_retry;
  a.sq_psn = 0;
  a.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                           IBV_QP_MAX_QP_RD_ATOMIC);
}

int connect_rc(ibv_qp* qp, uint32_t dest_qpn, const ibv_gid& dgid, const RcParams& p) {
  if (int e = to_init(qp, p.qp_access)) return e;
  if (int e = to_rtr(qp, dest_qpn, dgid, p.min_rnr_timer)) return e;
  return to_rts(qp, p.timeout, p.retry_cnt, p.rnr_retry);
}

int to_state(ibv_qp* qp, ibv_qp_state s) {
  ibv_qp_attr a{};
  a.qp_state = s;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

ibv_qp_state query_state(ibv_qp* qp) {
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) != 0) return IBV_QPS_UNKNOWN;
  return a.qp_state;
}

Endpoint::~Endpoint() {
  // Children before parents, as the verbs require (else EBUSY).
  if (qp) ibv_destroy_qp(qp);
  if (mr) ibv_dereg_mr(mr);
  if (send_cq) ibv_destroy_cq(send_cq);
  if (recv_cq) ibv_destroy_cq(recv_cq);
  if (pd) ibv_dealloc_pd(pd);
}

::testing::AssertionResult make_endpoint(ibv_context* ctx, const EndpointOptions& o, Endpoint* e) {
  e->pd = ibv_alloc_pd(ctx);
  if (!e->pd) return ::testing::AssertionFailure() << "ibv_alloc_pd: " << strerror(errno);
  e->send_cq = ibv_create_cq(ctx, o.cqe, nullptr, nullptr, 0);
  e->recv_cq = ibv_create_cq(ctx, o.cqe, nullptr, nullptr, 0);
  if (!e->send_cq || !e->recv_cq)
    return ::testing::AssertionFailure() << "ibv_create_cq: " << strerror(errno);
  e->buf.assign(o.buf_bytes, 0);
  e->mr = ibv_reg_mr(e->pd, e->buf.data(), e->buf.size(), int(o.mr_access));
  if (!e->mr) return ::testing::AssertionFailure() << "ibv_reg_mr: " << strerror(errno);
  ibv_qp_init_attr ia{};
  ia.send_cq = e->send_cq;
  ia.recv_cq = e->recv_cq;
  ia.qp_type = o.type;
  ia.cap.max_send_wr = o.max_send_wr;
  ia.cap.max_recv_wr = o.max_recv_wr;
  ia.cap.max_send_sge = 4;
  ia.cap.max_recv_sge = 4;
  e->qp = ibv_create_qp(e->pd, &ia);
  if (!e->qp) return ::testing::AssertionFailure() << "ibv_create_qp: " << strerror(errno);
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult make_rc_pair(ibv_context* ctx, RcPair* p, const EndpointOptions& o,
                                        const RcParams& pa, const RcParams& pb) {
  if (auto r = make_endpoint(ctx, o, &p->a); !r) return r;
  if (auto r = make_endpoint(ctx, o, &p->b); !r) return r;
  const ibv_gid gid = lo_gid(ctx);
  if (int e = connect_rc(p->a.qp, p->b.qp->qp_num, gid, pa))
    return ::testing::AssertionFailure() << "connect a: " << strerror(e);
  if (int e = connect_rc(p->b.qp, p->a.qp->qp_num, gid, pb))
    return ::testing::AssertionFailure() << "connect b: " << strerror(e);
  return ::testing::AssertionSuccess();
}

int post_send(ibv_qp* qp, uint64_t wr_id, ibv_wr_opcode op, ibv_sge* sge, int num_sge, uint64_t raddr,
              uint32_t rkey, unsigned flags) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.sg_list = sge;
  wr.num_sge = num_sge;
  wr.send_flags = flags;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

int post_recv(ibv_qp* qp, uint64_t wr_id, ibv_sge* sge, int num_sge) {
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = sge;
  wr.num_sge = num_sge;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(qp, &wr, &bad);
}

void VerbsTest::SetUp() {
  ctx_ = open_lo();
  ASSERT_NE(ctx_, nullptr) << "cannot open " << kDeviceName << ": " << strerror(errno);
  gid_ = lo_gid(ctx_);
}

VerbsTest::~VerbsTest() {
  if (ctx_) ibv_close_device(ctx_);
}

// --- Peer

namespace {

/// Reads one datagram of exactly `len` bytes within `timeout_ms`.
bool recv_exact(int fd, void* buf, size_t len, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  const int64_t deadline = now_ms() + timeout_ms;
  for (;;) {
    int left = int(deadline - now_ms());
    if (left <= 0) return false;
    int r = poll(&p, 1, left);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    ssize_t n = recv(fd, buf, len, 0);
    if (n < 0 && errno == EINTR) continue;
    return n == ssize_t(len);
  }
}

}  // namespace

Peer::~Peer() { kill_and_reap(SIGKILL); }

::testing::AssertionResult Peer::start(const PeerHello& hello, PeerReady* ready) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return ::testing::AssertionFailure() << "socketpair: " << strerror(errno);
  pid_t pid = fork();
  if (pid < 0) {
    close(sv[0]);
    close(sv[1]);
    return ::testing::AssertionFailure() << "fork: " << strerror(errno);
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    if (dup2(sv[1], kPeerFd) < 0) _exit(126);
    const char* path = UROCE_FAULT_PEER_PATH;
    char* argv[] = {const_cast<char*>(path), nullptr};
    execv(path, argv);
    _exit(127);
  }
  close(sv[1]);
  pid_ = pid;
  sock_ = sv[0];
  if (send(sock_, &hello, sizeof(hello), MSG_NOSIGNAL) != ssize_t(sizeof(hello)))
    return ::testing::AssertionFailure() << "send hello: " << strerror(errno);
  if (!recv_exact(sock_, ready, sizeof(*ready), kWaitMs))
    return ::testing::AssertionFailure() << "peer did not report ready within " << kWaitMs << " ms";
  if (ready->status != 0)
    return ::testing::AssertionFailure() << "peer setup failed: " << strerror(ready->status);
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult Peer::corrupt(uint32_t c) {
  PeerCorrupt pc{c};
  if (send(sock_, &pc, sizeof(pc), MSG_NOSIGNAL) != ssize_t(sizeof(pc)))
    return ::testing::AssertionFailure() << "send corrupt: " << strerror(errno);
  PeerReady ack{};
  if (!recv_exact(sock_, &ack, sizeof(ack), kWaitMs))
    return ::testing::AssertionFailure() << "peer did not answer within " << kWaitMs << " ms";
  if (ack.status != 0) return ::testing::AssertionFailure() << "peer: " << strerror(ack.status);
  return ::testing::AssertionSuccess();
}

bool Peer::kill_and_reap(int sig) {
  if (sock_ >= 0) {
    close(sock_);
    sock_ = -1;
  }
  if (pid_ <= 0) return true;
  kill(pid_, sig);
  const int64_t deadline = now_ms() + kWaitMs;
  for (;;) {
    int st;
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      pid_ = -1;
      return true;
    }
    if (now_ms() >= deadline) break;
    usleep(1000);
  }
  // Last resort, so no test leaves a process behind.
  kill(pid_, SIGKILL);
  int st;
  waitpid(pid_, &st, 0);
  pid_ = -1;
  return false;
}

bool Peer::kill_leave_zombie() {
  if (pid_ <= 0) return false;
  if (kill(pid_, SIGKILL) != 0) return false;
  // SIGKILL is delivered asynchronously: until the process has exited, its
  // memory is still there to be written. WNOWAIT keeps the zombie.
  const int64_t deadline = now_ms() + kWaitMs;
  while (now_ms() < deadline) {
    siginfo_t si{};
    if (waitid(P_PID, id_t(pid_), &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid_) return true;
    usleep(500);
  }
  return false;
}

// --- uroced

namespace {

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace

pid_t find_uroced(const std::string& daemon_name) {
  const std::string want = "UROCE_DAEMON_NAME=" + daemon_name;
  DIR* d = opendir("/proc");
  if (!d) return -1;
  pid_t found = -1;
  while (dirent* e = readdir(d)) {
    char* end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end || pid <= 0 || pid == getpid()) continue;
    const std::string dir = std::string("/proc/") + e->d_name;
    // argv[0] is "uroced" (the library execs it so); check the basename.
    std::string cmd = read_all(dir + "/cmdline");
    std::string argv0 = cmd.substr(0, cmd.find('\0'));
    if (argv0.substr(argv0.rfind('/') + 1) != "uroced") continue;
    std::string env = read_all(dir + "/environ");
    for (size_t pos = 0; pos < env.size();) {
      size_t nul = env.find('\0', pos);
      if (nul == std::string::npos) nul = env.size();
      if (env.compare(pos, nul - pos, want) == 0) {
        found = pid_t(pid);
        break;
      }
      pos = nul + 1;
    }
    if (found > 0) break;
  }
  closedir(d);
  return found;
}

}  // namespace uroce::fault
