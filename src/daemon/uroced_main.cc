// uroced: the per-host control path (the kernel's and NIC firmware's role in
// rdma-core): device registry, QPN and key allocation, QPN -> owner
// resolution, client liveness. One thread, one epoll loop; never on the data
// path. Started by the library on first use; exits by itself when idle.
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/log.h"
#include "common/unix_socket.h"
#include "contract/cm_protocol.h"
#include "contract/control_protocol.h"
#include "contract/shm_layout.h"
#include "daemon/cm_service.h"
#include "daemon/frame_watch.h"
#include "daemon/gsi.h"
#include "daemon/linger.h"
#include "daemon/netdev.h"
#include "daemon/peer_check.h"
#include "daemon/requests.h"

namespace uroce::daemon {
namespace {

using control::Request;

int make_host_shm() {
  int fd = memfd_create("uroce-host", MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (ftruncate(fd, sizeof(core::HostShm)) != 0) {
    close(fd);
    return -1;
  }
  void* p = mmap(nullptr, sizeof(core::HostShm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return -1;
  }
  static_cast<core::HostShm*>(p)->magic = core::kSegMagic;
  munmap(p, sizeof(core::HostShm));
  return fd;
}

class Server {
 public:
  int run(uint64_t idle_ms) {
    sockaddr_un addr;
    socklen_t alen = make_abstract_addr(control::daemon_socket_name(), &addr);
    lsock_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (lsock_ < 0) return 1;
    if (bind(lsock_, reinterpret_cast<sockaddr*>(&addr), alen) != 0) {
      // Another uroced won the race to start: that one serves.
      return errno == EADDRINUSE ? 0 : 1;
    }
    if (listen(lsock_, 128) != 0) return 1;
    host_shm_fd_ = make_host_shm();
    if (host_shm_fd_ < 0) return 1;
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    add_fd(lsock_);
    if (!frames_.start()) return 1;
    spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
    requests_ =
        std::make_unique<Requests>(host_shm_fd_, Requests::Hooks{
                                                     .devices = discover_devices,
                                                     .id_watch_fd = [this] { return frames_.client_fd(); },
                                                     .watch = [this](int fd) { add_fd(fd); },
                                                     .xdp = &xdp_,
                                                 });
    cm_ = std::make_unique<CmService>(
        CmService::Hooks{
            .want_write =
                [this](int fd, bool on) {
                  epoll_event ev{};
                  ev.events = EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0u);
                  ev.data.fd = fd;
                  epoll_ctl(ep_, EPOLL_CTL_MOD, fd, &ev);
                },
            .send_mad = [this](const link::IpAddr& local, const link::IpAddr& remote,
                               std::span<const uint8_t> mad) { return gsi_.send(local, remote, mad); },
            .node_guid = [this](const link::IpAddr& local) { return gsi_.node_guid(local); },
        },
        CmTiming::from_env());
    if (frames_.fd() >= 0) add_fd(frames_.fd());
    // QP1's inbox now, its sockets with the first CM client (open_gsi). Our
    // own receivers believe identifications the frame watch saw too.
    link::set_id_watch(frames_.table());
    if (gsi_.start()) add_fd(gsi_.inbox_fd());
    uint64_t idle_since = now_ns();
    for (;;) {
      epoll_event evs[32];
      int n = epoll_wait(ep_, evs, 32, wait_ms());
      if (n < 0 && errno != EINTR) return 1;
      for (int i = 0; i < n; ++i) {
        int fd = evs[i].data.fd;
        if (fd == lsock_) {
          accept_all();
        } else if (fd == frames_.fd()) {
          frames_.on_readable();
        } else if (gsi_.owns(fd)) {
          on_gsi(fd);
        } else if (requests_->lingers().owns(fd)) {
          requests_->lingers().on_readable(fd, now_ns(), [this](uint32_t qpn) {
            auto r = requests_->registry().resolve_qpn(qpn);
            return r.is_ok() ? r.value().pid : 0;
          });
        } else {
          handle_client(fd, evs[i].events);
        }
      }
      requests_->lingers().expire(now_ns(), [this](int fd) { epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr); });
      if (gsi_.parked())
        for (int fd : gsi_.fds()) on_gsi(fd);
      cm_->expire(now_ns());
      for (int d : cm_->take_drops()) drop_client(d);
      if (!requests_->empty() || !requests_->lingers().empty()) {
        idle_since = now_ns();
      } else if (now_ns() - idle_since > idle_ms * 1000000ull) {
        // A client that connected since the last look is served, not left
        // with a connection that closes unanswered (it would start another
        // uroced, but a moment late). One that connects after this finds
        // no listener and starts one itself.
        accept_all();
        if (!requests_->empty()) continue;
        UROCE_INFO("uroced: idle, exiting");
        return 0;
      }
    }
  }

 private:
  /// How long the loop may sleep: until the CM's next timer, a little for
  /// packets that wait for evidence (link/id_trust.h), else 100 ms.
  int wait_ms() const {
    if (gsi_.parked()) return 1;
    const uint64_t next = cm_->next_deadline_ns(), now = now_ns();
    if (next == UINT64_MAX) return 100;
    return next <= now ? 0 : int(std::min<uint64_t>(100, (next - now) / 1000000 + 1));
  }

  /// QP1's sockets (daemon/gsi.h), when the first process opens the CM:
  /// it does so before it makes its QPs, whose sockets then come after
  /// them, and a uroced whose clients never use the CM binds nothing that
  /// could take another's datagrams (parallel tests each run their own).
  /// Later clients may bring new addresses.
  void open_gsi() {
    gsi_.open(discover_devices(), [this](int fd) { add_fd(fd); });
  }

  void on_gsi(int fd) {
    gsi_.on_readable(
        fd,
        [this](std::span<const uint8_t> mad, const link::UdpAddr& from, const link::UdpAddr& to) {
          cm_->on_mad(mad, from.ip, to.ip, now_ns());
        },
        [this](uint32_t qpn) {
          auto r = requests_->registry().resolve_qpn(qpn);
          return r.is_ok() ? r.value().pid : 0;
        });
    for (int d : cm_->take_drops()) drop_client(d);
  }

  void add_fd(int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
  }

  void accept_all() {
    for (;;) {
      // Nonblocking: a client that stops reading its replies is dropped,
      // never waited for (handle_client).
      int c = accept4(lsock_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c < 0) {
        if ((errno == EMFILE || errno == ENFILE) && spare_fd_ >= 0) {
          // Out of descriptors: take the waiting connection with the spare
          // one and close it, or the listener stays readable and the loop spins.
          close(spare_fd_);
          c = accept4(lsock_, nullptr, nullptr, SOCK_CLOEXEC);
          if (c >= 0) close(c);
          spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
          if (c >= 0) continue;
        }
        return;
      }
      const PeerCheck who = check_peer(c, trusted_gid_);
      if (!requests_->open(c, who.pid, who.trusted)) {
        if (over_limit_++ < kRefusedLogged)
          UROCE_WARN("uroced: pid %d has too many connections (or all have too many); closing one",
                     int(who.pid));
        close(c);
        continue;
      }
      if (!who.trusted && refused_++ < kRefusedLogged)
        // Answered EACCES at its first request, then dropped.
        UROCE_WARN("uroced: refused pid %d of uid %u (this daemon serves uid %u%s)", int(who.pid),
                   unsigned(who.uid), unsigned(geteuid()), trusted_gid_ >= 0 ? " and UROCED_TRUST_GID" : "");
      add_fd(c);
    }
  }

  void drop_client(int fd) {
    cm_->close(fd);
    requests_->close(fd);
    epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr);
    close(fd);
  }

  void handle_client(int fd, uint32_t events) {
    handle_one(fd, events);
    for (int d : cm_->take_drops()) drop_client(d);
  }

  void handle_one(int fd, uint32_t events) {
    if (cm_->owns(fd) && (events & EPOLLOUT)) {
      cm_->on_writable(fd);
      if (!(events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP | EPOLLERR))) return;
    }
    // The largest message of the protocols and a little more, so that an
    // oversized one is seen as such (Requests::handle drops its sender).
    alignas(cmproto::Msg)
        uint8_t buf[std::max({sizeof(Request), sizeof(control::RawRuleRequest), sizeof(cmproto::Msg)}) + 64];
    int passed = -1;
    ssize_t n = recv_msg_fd(fd, buf, sizeof(buf), &passed, 0);
    if (n == -ETIMEDOUT && !(events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR))) return;
    if (n == -EAGAIN) return;
    if (n <= 0) {
      if (passed >= 0) close(passed);
      drop_client(fd);
      return;
    }
    if (cm_->owns(fd) || is_cm_open(buf, size_t(n))) {
      if (passed >= 0) close(passed);  // the CM passes no descriptors
      if (!cm_->owns(fd)) {
        const pid_t pid = requests_->trusted_pid(fd);
        if (pid == 0) {
          drop_client(fd);  // another user's process: no CM either
          return;
        }
        open_gsi();
        cm_->adopt(fd, pid, *reinterpret_cast<const cmproto::Msg*>(buf));
      } else {
        cm_->on_message(fd, buf, size_t(n), now_ns());
      }
      return;
    }
    Requests::Answer a = requests_->handle(fd, buf, size_t(n), passed);
    // (A posted request has no answer: a.send false.)
    const bool failed = a.send && send_msg_fd(fd, a.reply.get(), a.len, a.fd) < 0;
    if (a.close_fd && a.fd >= 0) close(a.fd);
    if (failed || a.drop) drop_client(fd);
  }

  static bool is_cm_open(const uint8_t* buf, size_t n) {
    uint32_t op = 0;
    if (n != sizeof(cmproto::Msg)) return false;
    memcpy(&op, buf, sizeof(op));
    return op == uint32_t(cmproto::Op::kCmOpen);
  }

  static constexpr uint64_t kRefusedLogged = 10;  // refusals logged, then only counted
  const long trusted_gid_ = trusted_gid_from_env();
  uint64_t refused_ = 0;
  uint64_t over_limit_ = 0;
  int lsock_ = -1;
  int ep_ = -1;
  int host_shm_fd_ = -1;
  int spare_fd_ = -1;  // given up to take a connection when out of descriptors
  FrameWatch frames_;
  Gsi gsi_;
  XdpPorts xdp_;  // before requests_, which points at it
  std::unique_ptr<Requests> requests_;
  std::unique_ptr<CmService> cm_;
};

}  // namespace
}  // namespace uroce::daemon

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  // Room for every client's connection and context segment within the
  // limits of daemon/requests.h and daemon/registry.h.
  if (rlimit rl; getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 32768) {
    rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 32768);
    (void)setrlimit(RLIMIT_NOFILE, &rl);
  }
  uint64_t idle_ms = 3000;
  if (const char* s = getenv("UROCED_IDLE_MS")) idle_ms = strtoull(s, nullptr, 10);
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--idle-ms") && i + 1 < argc) idle_ms = strtoull(argv[++i], nullptr, 10);
  }
  uroce::daemon::Server s;
  return s.run(idle_ms);
}
