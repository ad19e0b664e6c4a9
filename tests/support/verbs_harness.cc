#include "support/verbs_harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace uroce::test {
namespace {

uint64_t mono_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

void nap_us(long us) {
  timespec ts{us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, nullptr);
}

std::string errno_str(const char* what) { return std::string(what) + ": " + strerror(errno); }

}  // namespace

// ---------------------------------------------------------------------------
// Channel

Channel::~Channel() {
  if (fd_ >= 0) close(fd_);
}

bool Channel::send(const void* p, size_t n) {
  ssize_t r;
  do {
    r = ::send(fd_, p, n, MSG_NOSIGNAL);
  } while (r < 0 && errno == EINTR);
  if (r != ssize_t(n)) {
    error_ = r < 0 ? errno_str("send") : "short send";
    return false;
  }
  return true;
}

bool Channel::recv(void* p, size_t n, int timeout_ms) {
  const uint64_t deadline = mono_ms() + uint64_t(timeout_ms);
  for (;;) {
    const uint64_t now = mono_ms();
    if (now >= deadline) {
      error_ = "timed out waiting for the peer";
      return false;
    }
    pollfd pf{fd_, POLLIN, 0};
    int pr = poll(&pf, 1, int(deadline - now));
    if (pr < 0 && errno == EINTR) continue;
    if (pr < 0) {
      error_ = errno_str("poll");
      return false;
    }
    if (pr == 0) continue;
    // One message per recv (SOCK_SEQPACKET); MSG_TRUNC reports its real size.
    ssize_t r = ::recv(fd_, p, n, MSG_DONTWAIT | MSG_TRUNC);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r < 0) {
      error_ = errno_str("recv");
      return false;
    }
    if (r == 0) {
      error_ = "peer closed the channel (exited or died)";
      return false;
    }
    if (size_t(r) != n) {
      error_ = "message of " + std::to_string(r) + " bytes, expected " + std::to_string(n);
      return false;
    }
    return true;
  }
}

// ---------------------------------------------------------------------------
// PeerProcess

std::unique_ptr<PeerProcess> PeerProcess::spawn(std::function<int(Channel&)> body) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return nullptr;
  fflush(stdout);
  fflush(stderr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(sv[0]);
    close(sv[1]);
    return nullptr;
  }
  if (pid == 0) {
    close(sv[0]);
    // Never outlive the test: die with the parent, and after a hard limit.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(99);
    alarm(kChildLifetimeS);
    int rc;
    {
      Channel ch(sv[1]);
      rc = body(ch);
    }
    fflush(stderr);
    _exit(rc);
  }
  close(sv[1]);
  return std::unique_ptr<PeerProcess>(new PeerProcess(pid, sv[0]));
}

PeerProcess::~PeerProcess() { kill_and_reap(); }

void PeerProcess::kill_and_reap() {
  if (reaped_) return;
  kill(pid_, SIGKILL);  // works on stopped processes too
  const uint64_t deadline = mono_ms() + kWaitMs;
  int st;
  while (mono_ms() < deadline) {
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      reaped_ = true;
      return;
    }
    nap_us(1000);
  }
  fprintf(stderr, "verbs_harness: child %d did not die after SIGKILL\n", int(pid_));
}

int PeerProcess::wait_exit(int timeout_ms) {
  if (reaped_) return exit_code_;
  const uint64_t deadline = mono_ms() + uint64_t(timeout_ms);
  for (;;) {
    int st;
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      if (WIFEXITED(st) || WIFSIGNALED(st)) {
        reaped_ = true;
        exit_code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return exit_code_;
      }
    } else if (r < 0) {
      return -1;
    }
    if (mono_ms() >= deadline) return -1;
    nap_us(1000);
  }
}

bool PeerProcess::is_stopped() const {
  std::ifstream f("/proc/" + std::to_string(pid_) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return false;
  // The state follows the parenthesised command name, which may hold spaces.
  size_t p = line.rfind(')');
  return p != std::string::npos && p + 2 < line.size() && (line[p + 2] == 'T' || line[p + 2] == 't');
}

bool PeerProcess::stop(int timeout_ms) {
  if (kill(pid_, SIGSTOP) != 0) return false;
  const uint64_t deadline = mono_ms() + uint64_t(timeout_ms);
  while (!is_stopped()) {
    if (mono_ms() >= deadline) return false;
    nap_us(200);
  }
  return true;
}

bool PeerProcess::cont() { return kill(pid_, SIGCONT) == 0; }

void child_fail(const char* file, int line, const std::string& what) {
  fprintf(stderr, "child %d: %s:%d: %s\n", int(getpid()), file, line, what.c_str());
  _exit(3);
}

// ---------------------------------------------------------------------------
// Patterns

namespace {
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline uint64_t pattern_word(uint32_t seed, uint64_t word) { return mix64((uint64_t(seed) << 40) ^ word); }
}  // namespace

uint8_t pattern_byte(uint32_t seed, uint64_t pos) {
  return uint8_t(pattern_word(seed, pos >> 3) >> (8 * (pos & 7)));
}

void fill_pattern(void* p, size_t n, uint32_t seed, uint64_t pos) {
  auto* b = static_cast<uint8_t*>(p);
  uint64_t w = pattern_word(seed, pos >> 3);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t q = pos + i;
    if ((q & 7) == 0) w = pattern_word(seed, q >> 3);
    b[i] = uint8_t(w >> (8 * (q & 7)));
  }
}

int64_t find_pattern_mismatch(const void* p, size_t n, uint32_t seed, uint64_t pos) {
  const auto* b = static_cast<const uint8_t*>(p);
  uint64_t w = pattern_word(seed, pos >> 3);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t q = pos + i;
    if ((q & 7) == 0) w = pattern_word(seed, q >> 3);
    if (b[i] != uint8_t(w >> (8 * (q & 7)))) return int64_t(i);
  }
  return -1;
}

// ---------------------------------------------------------------------------
// ShadowedMemory

ShadowedMemory::~ShadowedMemory() {
  if (mem_) munmap(mem_, size_);
}

bool ShadowedMemory::allocate(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  mem_ = static_cast<uint8_t*>(p);
  size_ = bytes;
  shadow_.assign(bytes, 0);
  return true;
}

bool ShadowedMemory::in_range(const char* what, uint64_t off, uint64_t len) {
  if (off <= size_ && len <= size_ - off) return true;
  if (range_error_.empty()) {
    range_error_ = std::string(what) + "(off=" + std::to_string(off) + ", len=" + std::to_string(len) +
                   ") is outside the " + std::to_string(size_) + "-byte buffer (a test bug)";
  }
  return false;
}

void ShadowedMemory::fill(uint64_t off, uint64_t len, uint32_t seed, uint64_t pos) {
  if (!in_range("fill", off, len)) return;
  fill_pattern(mem_ + off, len, seed, pos);
  fill_pattern(shadow_.data() + off, len, seed, pos);
}

void ShadowedMemory::expect(uint64_t off, uint64_t len, uint32_t seed, uint64_t pos) {
  if (!in_range("expect", off, len)) return;
  fill_pattern(shadow_.data() + off, len, seed, pos);
}

void ShadowedMemory::expect_bytes(uint64_t off, const void* p, uint64_t len) {
  if (!in_range("expect_bytes", off, len)) return;
  memcpy(shadow_.data() + off, p, len);
}

void ShadowedMemory::accept(uint64_t off, uint64_t len) {
  if (!in_range("accept", off, len)) return;
  memcpy(shadow_.data() + off, mem_ + off, len);
}

uint64_t ShadowedMemory::u64_at(uint64_t off) const {
  uint64_t v = 0;
  if (off > size_ || size_ - off < 8) return v;
  memcpy(&v, mem_ + off, 8);
  return v;
}

std::string ShadowedMemory::verify() const {
  if (!range_error_.empty()) return range_error_;
  if (memcmp(mem_, shadow_.data(), size_) == 0) return "";
  size_t first = 0, last = 0, count = 0;
  for (size_t i = 0; i < size_; ++i) {
    if (mem_[i] != shadow_[i]) {
      if (!count) first = i;
      last = i;
      ++count;
    }
  }
  char buf[256];
  snprintf(buf, sizeof(buf),
           "%zu of %zu bytes differ, in [%zu, %zu]; first at offset %zu: got 0x%02x, expected 0x%02x", count,
           size_, first, last, first, mem_[first], shadow_[first]);
  return buf;
}

// ---------------------------------------------------------------------------
// Verbs helpers

uint8_t gid_index() {
  static const uint8_t i = [] {
    const char* e = getenv("UROCE_TEST_GID_INDEX");
    return uint8_t(e && *e ? atoi(e) : 1);
  }();
  return i;
}

bool open_device(Device* d, std::string* err) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) {
    *err = errno_str("ibv_get_device_list");
    return false;
  }
  ibv_device* dev = nullptr;
  for (int i = 0; i < n; ++i)
    if (strcmp(ibv_get_device_name(list[i]), kDeviceName) == 0) dev = list[i];
  if (!dev) {
    ibv_free_device_list(list);
    *err = std::string("no device ") + kDeviceName + " among " + std::to_string(n);
    return false;
  }
  d->ctx.reset(ibv_open_device(dev));
  ibv_free_device_list(list);
  if (!d->ctx) {
    *err = errno_str("ibv_open_device");
    return false;
  }
  d->pd.reset(ibv_alloc_pd(d->ctx.get()));
  if (!d->pd) {
    *err = errno_str("ibv_alloc_pd");
    return false;
  }
  if (ibv_query_gid(d->ctx.get(), 1, gid_index(), &d->gid) != 0) {
    *err = errno_str("ibv_query_gid");
    return false;
  }
  return true;
}

ibv_qp* create_qp(ibv_pd* pd, ibv_qp_type type, ibv_cq* scq, ibv_cq* rcq, ibv_srq* srq, const QpCaps& caps) {
  ibv_qp_init_attr a;
  memset(&a, 0, sizeof(a));
  a.send_cq = scq;
  a.recv_cq = rcq;
  a.srq = srq;
  a.qp_type = type;
  a.sq_sig_all = caps.sq_sig_all ? 1 : 0;
  a.cap.max_send_wr = caps.max_send_wr;
  a.cap.max_recv_wr = srq ? 0 : caps.max_recv_wr;
  a.cap.max_send_sge = caps.max_sge;
  a.cap.max_recv_sge = srq ? 0 : caps.max_sge;
  a.cap.max_inline_data = caps.max_inline;
  return ibv_create_qp(pd, &a);
}

bool connect_qp(ibv_qp* qp, ibv_qp_type type, const WireInfo& peer, uint32_t qkey, std::string* err,
                uint32_t flow_label, uint8_t rnr_retry) {
  ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  if (type == IBV_QPT_UD) {
    a.qkey = qkey;
    mask |= IBV_QP_QKEY;
  } else {
    a.qp_access_flags = type == IBV_QPT_RC ? kRemoteAccess : IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    mask |= IBV_QP_ACCESS_FLAGS;
  }
  if (int e = ibv_modify_qp(qp, &a, mask)) {
    *err = std::string("modify to INIT: ") + strerror(e);
    return false;
  }
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  mask = IBV_QP_STATE;
  if (type != IBV_QPT_UD) {
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = peer.qpn;
    a.rq_psn = 0;
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, peer.gid, 16);
    a.ah_attr.grh.sgid_index = gid_index();
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.grh.flow_label = flow_label;
    a.ah_attr.port_num = 1;
    mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    if (type == IBV_QPT_RC) {
      a.max_dest_rd_atomic = 16;
      a.min_rnr_timer = 1;  // 0.01 ms: RNR waits stay short
      mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    }
  }
  if (int e = ibv_modify_qp(qp, &a, mask)) {
    *err = std::string("modify to RTR: ") + strerror(e);
    return false;
  }
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (type == IBV_QPT_RC) {
    // UROCE_TEST_QP_TIMEOUT: the local ACK timeout code for lossy-link runs
    // (the UDP flood under injected loss; 14 = 67 ms otherwise).
    const char* t = getenv("UROCE_TEST_QP_TIMEOUT");
    a.timeout = t && *t ? uint8_t(atoi(t)) : 14;
    a.retry_cnt = 7;
    a.rnr_retry = rnr_retry;
    a.max_rd_atomic = 16;
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  if (int e = ibv_modify_qp(qp, &a, mask)) {
    *err = std::string("modify to RTS: ") + strerror(e);
    return false;
  }
  return true;
}

ibv_ah* create_ah(ibv_pd* pd, const uint8_t gid[16]) {
  ibv_ah_attr a;
  memset(&a, 0, sizeof(a));
  a.is_global = 1;
  memcpy(a.grh.dgid.raw, gid, 16);
  a.grh.sgid_index = gid_index();
  a.grh.hop_limit = 64;
  a.port_num = 1;
  return ibv_create_ah(pd, &a);
}

std::optional<ibv_wc> poll_one(ibv_cq* cq, int timeout_ms) {
  const uint64_t deadline = mono_ms() + uint64_t(timeout_ms);
  for (uint32_t spins = 0;; ++spins) {
    ibv_wc wc;
    int n = ibv_poll_cq(cq, 1, &wc);
    if (n == 1) return wc;
    if (n < 0) {
      fprintf(stderr, "verbs_harness: ibv_poll_cq returned %d\n", n);
      return std::nullopt;
    }
    if ((spins & 255) == 255) {
      if (mono_ms() >= deadline) return std::nullopt;
      nap_us(20);  // two cores are shared with the peer: do not starve it
    }
  }
}

std::vector<ibv_wc> poll_n(ibv_cq* cq, size_t n, int timeout_ms) {
  std::vector<ibv_wc> out;
  const uint64_t deadline = mono_ms() + uint64_t(timeout_ms);
  while (out.size() < n) {
    const uint64_t now = mono_ms();
    if (now >= deadline) break;
    auto wc = poll_one(cq, int(deadline - now));
    if (!wc) break;
    out.push_back(*wc);
  }
  return out;
}

std::vector<ibv_wc> drain_cq(ibv_cq* cq, int settle_ms) {
  std::vector<ibv_wc> out;
  while (auto wc = poll_one(cq, settle_ms)) out.push_back(*wc);
  return out;
}

std::string wc_str(const ibv_wc& wc) {
  char buf[256];
  snprintf(buf, sizeof(buf),
           "wc{wr_id=%llu status=%s(%d) opcode=%d byte_len=%u imm=0x%08x qp_num=0x%x src_qp=0x%x flags=0x%x}",
           (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), int(wc.status), int(wc.opcode),
           wc.byte_len, ntohl(wc.imm_data), wc.qp_num, wc.src_qp, unsigned(wc.wc_flags));
  return buf;
}

uint32_t imm_be(uint32_t host) { return htonl(host); }

// ---------------------------------------------------------------------------
// LocalEnd

bool LocalEnd::open(const EndConfig& c, std::string* err) {
  cfg = c;
  if (!open_device(&dev, err)) return false;
  ibv_context* ctx = dev.ctx.get();
  if (cfg.recv_channel) {
    channel.reset(ibv_create_comp_channel(ctx));
    if (!channel) {
      *err = errno_str("ibv_create_comp_channel");
      return false;
    }
  }
  scq.reset(ibv_create_cq(ctx, cfg.cqe, nullptr, nullptr, 0));
  rcq.reset(ibv_create_cq(ctx, cfg.cqe, this, channel.get(), 0));
  if (!scq || !rcq) {
    *err = errno_str("ibv_create_cq");
    return false;
  }
  qp.reset(create_qp(dev.pd.get(), cfg.type, scq.get(), rcq.get(), nullptr, cfg.caps));
  if (!qp) {
    *err = errno_str("ibv_create_qp");
    return false;
  }
  if (!mem.allocate(cfg.buf_bytes)) {
    *err = errno_str("mmap");
    return false;
  }
  mem.fill(0, mem.size(), cfg.bg_seed);
  mr.reset(ibv_reg_mr(dev.pd.get(), mem.data(), mem.size(), kRemoteAccess));
  if (!mr) {
    *err = errno_str("ibv_reg_mr");
    return false;
  }
  return true;
}

WireInfo LocalEnd::info() const {
  WireInfo w;
  w.qpn = qp->qp_num;
  w.rkey = mr->rkey;
  w.addr = mem.addr();
  w.len = mem.size();
  memcpy(w.gid, dev.gid.raw, 16);
  w.qkey = cfg.qkey;
  return w;
}

bool LocalEnd::connect(const WireInfo& peer, std::string* err) {
  peer_qpn = peer.qpn;
  peer_qkey = peer.qkey;
  if (!connect_qp(qp.get(), cfg.type, peer, cfg.qkey, err, cfg.flow_label)) return false;
  if (cfg.type == IBV_QPT_UD) {
    ah.reset(create_ah(dev.pd.get(), peer.gid));
    if (!ah) {
      *err = errno_str("ibv_create_ah");
      return false;
    }
  }
  return true;
}

ibv_sge LocalEnd::sge(uint64_t off, uint32_t len) const { return ibv_sge{mem.addr(off), len, mr->lkey}; }

int LocalEnd::post_recv(uint64_t wr_id, std::initializer_list<ibv_sge> sges) {
  std::vector<ibv_sge> v(sges);
  ibv_recv_wr wr;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = wr_id;
  wr.sg_list = v.data();
  wr.num_sge = int(v.size());
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(qp.get(), &wr, &bad);
}

// ---------------------------------------------------------------------------
// Agent

namespace {
enum AgentOp : uint32_t {
  kPostRecv = 1,
  kPollRecv,
  kPostSend,
  kPollSend,
  kFill,
  kExpect,
  kExpectBytes,
  kReadBytes,
  kVerify,
};
constexpr uint32_t kMaxAgentSges = 8;
constexpr uint32_t kMaxAgentBytes = 64;
}  // namespace

/// One command to the agent; plain bytes on the channel.
struct AgentCmd {
  uint32_t op = 0;
  uint32_t nsge = 0;
  Seg sge[kMaxAgentSges] = {};
  uint64_t wr_id = 0;
  uint32_t opcode = 0;
  uint32_t send_flags = 0;
  uint32_t imm = 0;
  uint32_t seed = 0;
  uint64_t off = 0, len = 0, pos = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint32_t remote_qkey = 0;
  uint64_t compare_add = 0, swap = 0;
  int32_t timeout_ms = 0;
  uint32_t nbytes = 0;
  uint32_t delay_ms = 0;
  uint8_t bytes[kMaxAgentBytes] = {};
};

struct AgentReply {
  int32_t rc = 0;  // 0 or an errno; polls: 1 = got one, 0 = none
  ibv_wc wc{};
  uint8_t bytes[kMaxAgentBytes] = {};
  char msg[256] = {};
};

namespace {

bool in_range(const LocalEnd& e, uint64_t off, uint64_t len) {
  return off <= e.mem.size() && len <= e.mem.size() - off;
}

void agent_post_send(LocalEnd& e, const AgentCmd& c, AgentReply* r) {
  if (c.delay_ms) nap_us(long(c.delay_ms) * 1000);
  ibv_sge sges[kMaxAgentSges];
  for (uint32_t i = 0; i < c.nsge; ++i) sges[i] = e.sge(c.sge[i].off, c.sge[i].len);
  ibv_send_wr wr;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = c.wr_id;
  wr.opcode = ibv_wr_opcode(c.opcode);
  wr.send_flags = c.send_flags;
  wr.imm_data = c.imm;
  wr.sg_list = sges;
  wr.num_sge = int(c.nsge);
  if (c.opcode == IBV_WR_ATOMIC_CMP_AND_SWP || c.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    wr.wr.atomic.remote_addr = c.remote_addr;
    wr.wr.atomic.rkey = c.rkey;
    wr.wr.atomic.compare_add = c.compare_add;
    wr.wr.atomic.swap = c.swap;
  } else if (e.cfg.type == IBV_QPT_UD) {
    wr.wr.ud.ah = e.ah.get();
    wr.wr.ud.remote_qpn = e.peer_qpn;
    wr.wr.ud.remote_qkey = c.remote_qkey;
  } else {
    wr.wr.rdma.remote_addr = c.remote_addr;
    wr.wr.rdma.rkey = c.rkey;
  }
  ibv_send_wr* bad = nullptr;
  r->rc = ibv_post_send(e.qp.get(), &wr, &bad);
}

void agent_poll(ibv_cq* cq, const AgentCmd& c, AgentReply* r) {
  auto wc = poll_one(cq, c.timeout_ms);
  r->rc = wc ? 1 : 0;
  if (wc) r->wc = *wc;
}

/// The child side: one LocalEnd and a command loop until the channel closes.
int agent_main(Channel& ch, const EndConfig& cfg) {
  LocalEnd e;
  std::string err;
  if (!e.open(cfg, &err)) child_fail(__FILE__, __LINE__, "agent setup: " + err);
  CHILD_CHECK(ch.send_pod(e.info()), "agent: send info: " + ch.error());
  WireInfo peer;
  CHILD_CHECK(ch.recv_pod(&peer), "agent: recv peer info: " + ch.error());
  const int32_t ready = e.connect(peer, &err) ? 0 : -1;
  if (ready) fprintf(stderr, "agent %d: connect: %s\n", int(getpid()), err.c_str());
  CHILD_CHECK(ch.send_pod(ready), "agent: send ready");
  if (ready) return 3;
  for (;;) {
    AgentCmd c;
    // The parent may keep us waiting (or stopped) for a while; the alarm bounds it.
    if (!ch.recv_pod(&c, kChildLifetimeS * 1000)) return 0;
    AgentReply r;
    const bool range_ok = in_range(e, c.off, c.len) && c.nsge <= kMaxAgentSges && c.nbytes <= kMaxAgentBytes;
    if (!range_ok) {
      r.rc = ERANGE;
    } else {
      switch (c.op) {
        case kPostRecv: {
          ibv_sge sges[kMaxAgentSges];
          for (uint32_t i = 0; i < c.nsge; ++i) sges[i] = e.sge(c.sge[i].off, c.sge[i].len);
          ibv_recv_wr wr;
          memset(&wr, 0, sizeof(wr));
          wr.wr_id = c.wr_id;
          wr.sg_list = sges;
          wr.num_sge = int(c.nsge);
          ibv_recv_wr* bad = nullptr;
          r.rc = ibv_post_recv(e.qp.get(), &wr, &bad);
          break;
        }
        case kPollRecv:
          agent_poll(e.rcq.get(), c, &r);
          break;
        case kPostSend:
          agent_post_send(e, c, &r);
          break;
        case kPollSend:
          agent_poll(e.scq.get(), c, &r);
          break;
        case kFill:
          e.mem.fill(c.off, c.len, c.seed, c.pos);
          break;
        case kExpect:
          e.mem.expect(c.off, c.len, c.seed, c.pos);
          break;
        case kExpectBytes:
          if (!in_range(e, c.off, c.nbytes))
            r.rc = ERANGE;
          else
            e.mem.expect_bytes(c.off, c.bytes, c.nbytes);
          break;
        case kReadBytes:
          if (!in_range(e, c.off, c.nbytes))
            r.rc = ERANGE;
          else
            memcpy(r.bytes, e.mem.data() + c.off, c.nbytes);
          break;
        case kVerify: {
          std::string v = e.mem.verify();
          r.rc = v.empty() ? 0 : 1;
          snprintf(r.msg, sizeof(r.msg), "%s", v.c_str());
          break;
        }
        default:
          r.rc = EINVAL;
      }
    }
    if (!ch.send_pod(r)) return 0;
  }
}

}  // namespace

std::unique_ptr<Agent> Agent::start(const EndConfig& cfg, std::string* err) {
  std::unique_ptr<Agent> a(new Agent());
  a->proc_ = PeerProcess::spawn([cfg](Channel& ch) { return agent_main(ch, cfg); });
  if (!a->proc_) {
    *err = errno_str("fork");
    return nullptr;
  }
  if (!a->proc_->chan().recv_pod(&a->info_)) {
    *err = "agent did not start: " + a->proc_->chan().error();
    return nullptr;
  }
  return a;
}

bool Agent::connect(const WireInfo& peer) {
  int32_t ready = -1;
  if (!proc_->chan().send_pod(peer) || !proc_->chan().recv_pod(&ready)) {
    error_ = proc_->chan().error();
    return false;
  }
  if (ready != 0) error_ = "agent could not connect its QP (see its stderr)";
  return ready == 0;
}

bool Agent::call(const AgentCmd& c, AgentReply* r, int timeout_ms) {
  // The agent may itself wait up to c.timeout_ms before answering.
  if (!proc_->chan().send_pod(c) || !proc_->chan().recv_pod(r, timeout_ms + c.timeout_ms)) {
    error_ = "agent: " + proc_->chan().error();
    return false;
  }
  return true;
}

int Agent::post_recv(uint64_t wr_id, std::initializer_list<Seg> sges) {
  AgentCmd c;
  c.op = kPostRecv;
  c.wr_id = wr_id;
  if (sges.size() > kMaxAgentSges) return E2BIG;
  for (const Seg& s : sges) c.sge[c.nsge++] = s;
  AgentReply r;
  return call(c, &r) ? r.rc : -1;
}

int Agent::poll_recv(ibv_wc* wc, int timeout_ms) {
  AgentCmd c;
  c.op = kPollRecv;
  c.timeout_ms = timeout_ms;
  AgentReply r;
  if (!call(c, &r)) return -1;
  *wc = r.wc;
  return r.rc;
}

namespace {
AgentCmd send_cmd(const AgentSend& s) {
  AgentCmd c;
  c.op = kPostSend;
  c.wr_id = s.wr_id;
  c.opcode = s.opcode;
  c.send_flags = s.flags;
  c.imm = s.imm;
  for (const Seg& g : s.sges)
    if (c.nsge < kMaxAgentSges) c.sge[c.nsge++] = g;
  c.remote_addr = s.remote_addr;
  c.rkey = s.rkey;
  c.compare_add = s.compare_add;
  c.swap = s.swap;
  c.remote_qkey = s.remote_qkey;
  c.delay_ms = s.delay_ms;
  return c;
}
}  // namespace

int Agent::post_send(const AgentSend& s) {
  if (s.sges.size() > kMaxAgentSges) return E2BIG;
  AgentReply r;
  return call(send_cmd(s), &r, kWaitMs + int(s.delay_ms)) ? r.rc : -1;
}

bool Agent::post_send_nowait(const AgentSend& s) {
  if (s.sges.size() > kMaxAgentSges) return false;
  if (!proc_->chan().send_pod(send_cmd(s))) {
    error_ = "agent: " + proc_->chan().error();
    return false;
  }
  return true;
}

int Agent::finish_send() {
  AgentReply r;
  if (!proc_->chan().recv_pod(&r)) {
    error_ = "agent: " + proc_->chan().error();
    return -1;
  }
  return r.rc;
}

int Agent::poll_send(ibv_wc* wc, int timeout_ms) {
  AgentCmd c;
  c.op = kPollSend;
  c.timeout_ms = timeout_ms;
  AgentReply r;
  if (!call(c, &r)) return -1;
  *wc = r.wc;
  return r.rc;
}

bool Agent::fill(uint64_t off, uint64_t len, uint32_t seed, uint64_t pos) {
  AgentCmd c;
  c.op = kFill;
  c.off = off;
  c.len = len;
  c.seed = seed;
  c.pos = pos;
  AgentReply r;
  return call(c, &r) && r.rc == 0;
}

bool Agent::expect(uint64_t off, uint64_t len, uint32_t seed, uint64_t pos) {
  AgentCmd c;
  c.op = kExpect;
  c.off = off;
  c.len = len;
  c.seed = seed;
  c.pos = pos;
  AgentReply r;
  return call(c, &r) && r.rc == 0;
}

bool Agent::expect_bytes(uint64_t off, const void* p, uint32_t len) {
  if (len > kMaxAgentBytes) return false;
  AgentCmd c;
  c.op = kExpectBytes;
  c.off = off;
  c.nbytes = len;
  memcpy(c.bytes, p, len);
  AgentReply r;
  return call(c, &r) && r.rc == 0;
}

std::vector<uint8_t> Agent::read_bytes(uint64_t off, uint32_t len) {
  if (len > kMaxAgentBytes) return {};
  AgentCmd c;
  c.op = kReadBytes;
  c.off = off;
  c.nbytes = len;
  AgentReply r;
  if (!call(c, &r) || r.rc != 0) return {};
  return std::vector<uint8_t>(r.bytes, r.bytes + len);
}

std::string Agent::verify() {
  AgentCmd c;
  c.op = kVerify;
  AgentReply r;
  if (!call(c, &r)) return error_;
  if (r.rc == 0) return "";
  return std::string("agent memory: ") + r.msg;
}

}  // namespace uroce::test
