#include "contract/control_client.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "common/unix_socket.h"
#include "contract/control_protocol.h"
#include "contract/qp_directory.h"
#include "link/id_watch.h"

namespace uroce::core {

namespace {
std::atomic<const QpDirectory*> g_directory{nullptr};
}  // namespace

const QpDirectory* qp_directory() { return g_directory.load(std::memory_order_acquire); }
void set_qp_directory(const QpDirectory* t) { g_directory.store(t, std::memory_order_release); }

using control::MsgType;
using control::Reply;
using control::Request;

namespace {

constexpr int kReplyTimeoutMs = 10000;
constexpr uint64_t kSpawnWaitNs = 5000000000ull;
constexpr int kHelloAttempts = 3;

bool is_exec(const std::string& p) { return !p.empty() && ::access(p.c_str(), X_OK) == 0; }

/// Where uroced lives: $UROCE_UROCED, else next to this library in the build
/// tree (../bin/uroced), else the installed libexec path.
std::string find_uroced() {
  if (const char* e = getenv("UROCE_UROCED"); e && *e) return e;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&find_uroced), &info) && info.dli_fname) {
    char real[PATH_MAX];
    if (realpath(info.dli_fname, real)) {
      std::string dir(real);
      dir = dir.substr(0, dir.rfind('/'));
      for (const char* rel :
           {"/../bin/uroced", "/uroced", "/../../libexec/uroce/uroced", "/../libexec/uroce/uroced"}) {
        if (is_exec(dir + rel)) return dir + rel;
      }
    }
  }
#ifdef UROCE_UROCED_INSTALL_PATH
  if (is_exec(UROCE_UROCED_INSTALL_PATH)) return UROCE_UROCED_INSTALL_PATH;
#endif
  return "uroced";
}

/// Starts uroced fully detached: double fork (no zombie, no SIGCHLD for the
/// app), new session, stdio on /dev/null, no inherited descriptors.
void spawn_uroced() {
  std::string path = find_uroced();
  UROCE_INFO("starting %s", path.c_str());
  // uroced gets the caller's environment but for LD_PRELOAD: a preload meant
  // for the program (librspreload turns sockets into rsockets) is not for it.
  std::vector<char*> env;
  for (char** e = environ; *e; ++e)
    if (strncmp(*e, "LD_PRELOAD=", 11) != 0) env.push_back(*e);
  env.push_back(nullptr);
  pid_t child = fork();
  if (child < 0) return;
  if (child == 0) {
    pid_t g = fork();
    if (g != 0) _exit(0);
    setsid();
    int nul = open("/dev/null", O_RDWR);
    if (nul >= 0) {
      dup2(nul, 0);
      dup2(nul, 1);
      dup2(nul, 2);
    }
    close_range(3, ~0u, 0);
    char* argv[] = {const_cast<char*>("uroced"), nullptr};
    if (path.find('/') != std::string::npos)
      execve(path.c_str(), argv, env.data());
    else
      execvpe(path.c_str(), argv, env.data());
    _exit(127);
  }
  int st;
  while (waitpid(child, &st, 0) < 0 && errno == EINTR) {
  }
}

int try_connect() {
  int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  sockaddr_un addr;
  socklen_t len = make_abstract_addr(control::daemon_socket_name(), &addr);
  if (connect(s, reinterpret_cast<sockaddr*>(&addr), len) == 0) return s;
  close(s);
  return -1;
}

}  // namespace

namespace {
ControlClient* g_inst = nullptr;
std::mutex g_init_mu;
}  // namespace

void ControlClient::after_fork_child() {
  // Only the forking thread exists in the child: a lock another parent thread
  // held at fork() would never be released, so start from fresh locks.
  new (&g_init_mu) std::mutex();
  if (g_inst) new (&g_inst->mu_) std::mutex();
  // The child must not share the parent's control connection (requests and
  // replies would interleave); it connects anew, as its own client, on next use.
  if (g_inst && g_inst->fd_ >= 0) {
    close(g_inst->fd_);
    g_inst->fd_ = -1;
  }
}

Result<ControlClient*> ControlClient::get() {
  std::lock_guard<std::mutex> g(g_init_mu);
  ControlClient*& inst = g_inst;
  if (inst && inst->fd_ >= 0) return inst;
  if (!inst) {
    inst = new ControlClient();  // lives for the process
    pthread_atfork(nullptr, nullptr, [] { after_fork_child(); });
  }
  // A uroced that is exiting (idle) may have taken our connection and gone
  // without a word: the hello then finds the connection closed (ENODEV),
  // and a new uroced is started. A few times at most; a daemon that
  // answers with an error is believed.
  Status st;
  for (int attempt = 0; attempt < kHelloAttempts; ++attempt) {
    if (st = inst->connect_or_spawn(); !st) return st;
    if (st = inst->hello(); st) return inst;
    close(inst->fd_);
    inst->fd_ = -1;
    if (st.err() != ENODEV) break;
  }
  return st;
}

Status ControlClient::connect_or_spawn() {
  fd_ = try_connect();
  if (fd_ >= 0) return Status::ok();
  spawn_uroced();
  uint64_t deadline = now_ns() + kSpawnWaitNs;
  while (now_ns() < deadline) {
    fd_ = try_connect();
    if (fd_ >= 0) return Status::ok();
    usleep(2000);
  }
  UROCE_ERR("cannot reach uroced (%s)", find_uroced().c_str());
  return Status(ENODEV);
}

namespace {
/// Sends `len` bytes of `msg` (a Request, or a message that starts with one).
Status transact_msg(int fd, const void* msg, size_t len, Reply* rep, int send_fd, int* recv_fd) {
  if (fd < 0) return Status(ENODEV);
  if (send_msg_fd(fd, msg, len, send_fd) < 0) return Status(ENODEV);
  int got_fd = -1;
  ssize_t n = recv_msg_fd(fd, rep, sizeof(Reply), &got_fd, kReplyTimeoutMs);
  if (recv_fd)
    *recv_fd = got_fd;
  else if (got_fd >= 0)
    close(got_fd);
  if (n == -ETIMEDOUT) return Status(ETIMEDOUT);
  if (n < ssize_t(offsetof(Reply, devices))) return Status(ENODEV);
  return Status(rep->status);
}
Status transact(int fd, const Request& req, Reply* rep, int send_fd, int* recv_fd) {
  return transact_msg(fd, &req, sizeof(req), rep, send_fd, recv_fd);
}
/// A request whose answer is a descriptor (the caller's to close): EIO if
/// the reply carries none.
Result<int> transact_for_fd(int fd, const Request& req) {
  Reply rep;
  int got = -1;
  if (Status st = transact(fd, req, &rep, -1, &got); !st) {
    if (got >= 0) close(got);
    return st;
  }
  if (got < 0) return Status(EIO);
  return got;
}
}  // namespace

Status ControlClient::hello() {
  Request req{};
  req.type = uint32_t(MsgType::kHello);
  req.version = control::kProtoVersion;
  req.pid = getpid();
  auto rep = std::make_unique<Reply>();
  int shm_fd = -1;
  if (Status st = transact(fd_, req, rep.get(), -1, &shm_fd); !st) return st;
  devices_.assign(rep->devices, rep->devices + std::min(rep->num_devices, kMaxDevices));
  if (shm_fd >= 0) {
    void* p = mmap(nullptr, sizeof(HostShm), PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd, 0);
    close(shm_fd);
    if (p != MAP_FAILED) host_shm_ = static_cast<HostShm*>(p);
  }
  if (!host_shm_) return Status(ENOMEM);
  map_id_watch();
  map_qp_directory();
  return Status::ok();
}

/// Maps read-only the table uroced passes for `req` (`bytes` long, starting
/// with `magic`), or returns null: the caller then goes without it.
const void* ControlClient::map_table(const Request& req, size_t bytes, uint64_t magic, bool populate) {
  Reply rep;
  int fd = -1;
  if (!transact(fd_, req, &rep, -1, &fd) || fd < 0) {
    if (fd >= 0) close(fd);
    return nullptr;
  }
  void* p = mmap(nullptr, bytes, PROT_READ, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
  close(fd);
  if (p == MAP_FAILED) return nullptr;
  if (*static_cast<const uint64_t*>(p) != magic) {
    munmap(p, bytes);
    return nullptr;
  }
  return p;
}

void ControlClient::map_qp_directory() {
  // Once per process, as the id-watch table. Without it every resolution
  // asks uroced. Faulted in now, not on the first resolution (contract/qp_directory.h).
  if (qp_directory()) return;
  Request req{};
  req.type = uint32_t(MsgType::kQpDirectory);
  if (const void* t = map_table(req, sizeof(QpDirectory), QpDirectory::kMagic, true))
    set_qp_directory(static_cast<const QpDirectory*>(t));
}

Result<int> ControlClient::report() {
  std::lock_guard<std::mutex> g(mu_);
  Request req{};
  req.type = uint32_t(MsgType::kReport);
  return transact_for_fd(fd_, req);
}

void ControlClient::map_id_watch() {
  // Once per process (a forked child keeps its parent's mapping: same
  // uroced). Without it receivers go without uroced's record.
  if (link::id_watch()) return;
  Request req{};
  req.type = uint32_t(MsgType::kIdWatch);
  req.pid = getpid();
  if (const void* t = map_table(req, sizeof(link::IdWatchTable), link::IdWatchTable::kMagic, false))
    link::set_id_watch(static_cast<const link::IdWatchTable*>(t));
}

Result<uint32_t> ControlClient::register_ctx(int memfd, QpnBatch* batch) {
  std::lock_guard<std::mutex> g(mu_);
  Request req{};
  req.type = uint32_t(MsgType::kRegisterCtx);
  if (batch) {
    req.off = batch->off;
    req.arg[0] = batch->n;
    req.arg[1] = uint32_t(batch->stride);
  }
  Reply rep;
  if (Status st = transact(fd_, req, &rep, memfd, nullptr); !st) return st;
  if (batch) {
    batch->got = std::min(rep.key, batch->n);
    std::copy(rep.qpns, rep.qpns + batch->got, batch->qpns);
  }
  return rep.ctx_id;
}

void ControlClient::unregister_ctx(uint32_t ctx_id) {
  std::lock_guard<std::mutex> g(mu_);
  Request req{};
  req.type = uint32_t(MsgType::kUnregisterCtx);
  req.ctx_id = ctx_id;
  Reply rep;
  (void)transact(fd_, req, &rep, -1, nullptr);
}

Result<uint32_t> ControlClient::alloc_qpn(uint32_t ctx_id, uint64_t off, bool is_srq) {
  std::lock_guard<std::mutex> g(mu_);
  Request req{};
  req.type = uint32_t(MsgType::kAllocQpn);
  req.ctx_id = ctx_id;
  req.off = off;
  req.slot = is_srq ? 1 : 0;
  Reply rep;
  if (Status st = transact(fd_, req, &rep, -1, nullptr); !st) return st;
  return rep.qpn;
}

Result<uint32_t> ControlClient::alloc_qpns(uint32_t ctx_id, uint64_t off, uint64_t stride, uint32_t n,
                                           uint32_t* qpns) {
  std::lock_guard<std::mutex> g(mu_);
  Request req{};
  req.type = uint32_t(MsgType::kAllocQpn);
  req.ctx_id = ctx_id;
  req.off = off;
  req.arg[0] = n;
  req.arg[1] = uint32_t(stride);
  Reply rep;
  if (Status st = transact(fd_, req, &rep, -1, nullptr); !st) return st;
  const uint32_t got = std::min(rep.key, n);
  if (got == 0) return Status(EPROTO);
  std::copy(rep.qpns, rep.qpns + got, qpns);
  return got;
}

void ControlClient::free_qpn(uint32_t qpn) {
  std::lock_guard<std::mutex> g(mu_);
  Request req{};
  req.type = uint32_t(MsgType::kFreeQpn);
  req.qpn = qpn;
  // Posted: nothing to wait for (uroced takes it in order with what follows).
  if (send_msg_fd(fd_, &req, sizeof(req), -1) != ssize_t(sizeof(req)))
    UROCE_DBG("free of QPN %u not sent: %s", qpn, strerror(errno));
}

void ControlClient::linger(int rx_fd, uint32_t qpn, uint32_t dest_qpn, uint32_t epsn, uint32_t msn,
                           uint16_t sport, bool xrc) {
  std::lock_guard<std::mutex> g(mu_);
  Request req{};
  req.type = uint32_t(MsgType::kLinger);
  req.qpn = qpn;
  req.arg[0] = dest_qpn;
  req.arg[1] = epsn;
  req.arg[2] = msn;
  req.arg[3] = sport;
  req.slot = xrc ? 1 : 0;
  Reply rep;
  (void)transact(fd_, req, &rep, rx_fd, nullptr);
}

Result<uint32_t> ControlClient::alloc_key(uint32_t ctx_id, uint32_t slot) {
  std::lock_guard<std::mutex> g(mu_);
  Request req{};
  req.type = uint32_t(MsgType::kAllocKey);
  req.ctx_id = ctx_id;
  req.slot = slot;
  Reply rep;
  if (Status st = transact(fd_, req, &rep, -1, nullptr); !st) return st;
  return rep.key;
}

Result<uint32_t> ControlClient::open_xrcd(uint64_t dev, uint64_t ino) {
  std::lock_guard<std::mutex> g(mu_);
  Request req{};
  req.type = uint32_t(MsgType::kOpenXrcd);
  req.qpn = uint32_t(dev);
  req.off = ino;
  Reply rep;
  if (Status st = transact(fd_, req, &rep, -1, nullptr); !st) return st;
  return rep.key;
}

Result<int> ControlClient::xsk_open(uint32_t ifindex) {
  std::lock_guard<std::mutex> g(mu_);
  Request req{};
  req.type = uint32_t(MsgType::kXskOpen);
  req.arg[0] = ifindex;
  return transact_for_fd(fd_, req);
}

Status ControlClient::xsk_ready(uint32_t ifindex) {
  std::lock_guard<std::mutex> g(mu_);
  Request req{};
  req.type = uint32_t(MsgType::kXskReady);
  req.arg[0] = ifindex;
  Reply rep;
  return transact(fd_, req, &rep, -1, nullptr);
}

Status ControlClient::xsk_steer(uint32_t ifindex, uint32_t qpn, bool on) {
  std::lock_guard<std::mutex> g(mu_);
  Request req{};
  req.type = uint32_t(MsgType::kXskSteer);
  req.qpn = qpn;
  req.arg[0] = ifindex;
  req.arg[1] = on ? 1 : 0;
  Reply rep;
  return transact(fd_, req, &rep, -1, nullptr);
}

Status ControlClient::raw_access() {
  std::lock_guard<std::mutex> g(mu_);
  Request req{};
  req.type = uint32_t(MsgType::kRawAccess);
  Reply rep;
  return transact(fd_, req, &rep, -1, nullptr);
}

Status ControlClient::raw_rule(uint32_t ifindex, uint64_t id, const wire::FlowKey& val,
                               const wire::FlowKey& mask, bool on) {
  std::lock_guard<std::mutex> g(mu_);
  control::RawRuleRequest m{};
  m.req.type = uint32_t(MsgType::kRawRule);
  m.req.off = id;
  m.req.arg[0] = ifindex;
  m.req.arg[1] = on ? 1 : 0;
  m.val = val;
  m.mask = mask;
  Reply rep;
  return transact_msg(fd_, &m, sizeof(m), &rep, -1, nullptr);
}

Result<ControlClient::Resolved> ControlClient::resolve_qpn(uint32_t qpn, bool is_srq) {
  std::lock_guard<std::mutex> g(mu_);
  Request req{};
  req.type = uint32_t(MsgType::kResolveQpn);
  req.qpn = qpn;
  req.slot = is_srq ? 1 : 0;
  Reply rep;
  int fd = -1;
  if (Status st = transact(fd_, req, &rep, -1, &fd); !st) {
    if (fd >= 0) close(fd);
    return st;
  }
  return Resolved{rep.pid, rep.ctx_id, rep.off, fd};
}

bool ControlClient::knows_qpn(uint32_t qpn) {
  // uroced's directory holds only QPNs it handed out: found there, no need to ask.
  if (const QpDirectory* d = qp_directory(); d && qp_dir_get(d, qpn).found) return true;
  auto r = resolve_qpn(qpn);
  if (r.is_ok() && r->memfd >= 0) close(r->memfd);
  return r.is_ok() || r.err() != ENOENT;
}

}  // namespace uroce::core
