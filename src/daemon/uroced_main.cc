// uroced: the per-host control path (the kernel's and NIC firmware's role in
// rdma-core): device registry, QPN and key allocation, QPN -> owner
// resolution, client liveness. One thread, one epoll loop; never on the data
// path. Started by the library on first use; exits by itself when idle.
#include <signal.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

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
#include "core/control_protocol.h"
#include "core/shm_layout.h"
#include "daemon/frame_watch.h"
#include "daemon/linger.h"
#include "daemon/netdev.h"
#include "daemon/peer_check.h"
#include "daemon/registry.h"

namespace uroce::daemon {
namespace {

using control::MsgType;
using control::Reply;
using control::Request;

struct Client {
  int32_t pid = 0;
  bool refused = false;  // another user's process (daemon/peer_check.h)
};

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
    if (frames_.fd() >= 0) add_fd(frames_.fd());
    uint64_t idle_since = now_ns();
    for (;;) {
      epoll_event evs[32];
      int n = epoll_wait(ep_, evs, 32, 100);
      if (n < 0 && errno != EINTR) return 1;
      for (int i = 0; i < n; ++i) {
        int fd = evs[i].data.fd;
        if (fd == lsock_) {
          accept_all();
        } else if (fd == frames_.fd()) {
          frames_.on_readable();
        } else if (lingers_.owns(fd)) {
          lingers_.on_readable(fd, now_ns(), [this](uint32_t qpn) {
            auto r = registry_.resolve_qpn(qpn);
            return r.is_ok() ? r.value().pid : 0;
          });
        } else {
          handle_client(fd, evs[i].events);
        }
      }
      lingers_.expire(now_ns(), [this](int fd) { epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr); });
      if (!clients_.empty() || !lingers_.empty()) {
        idle_since = now_ns();
      } else if (now_ns() - idle_since > idle_ms * 1000000ull) {
        // A client that connected since the last look is served, not left
        // with a connection that closes unanswered (it would start another
        // uroced, but a moment late). One that connects after this finds
        // no listener and starts one itself.
        accept_all();
        if (!clients_.empty()) continue;
        UROCE_INFO("uroced: idle, exiting");
        return 0;
      }
    }
  }

 private:
  void add_fd(int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
  }

  void accept_all() {
    for (;;) {
      int c = accept4(lsock_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      Client cl;
      const PeerCheck who = check_peer(c, trusted_gid_);
      if (!who.trusted) {
        // Answered EACCES at its first request, then dropped.
        cl.refused = true;
        if (refused_++ < kRefusedLogged)
          UROCE_WARN("uroced: refused pid %d of uid %u (this daemon serves uid %u%s)", int(who.pid),
                     unsigned(who.uid), unsigned(geteuid()),
                     trusted_gid_ >= 0 ? " and UROCED_TRUST_GID" : "");
      }
      clients_[c] = cl;
      add_fd(c);
    }
  }

  void drop_client(int fd) {
    registry_.client_gone(fd);
    epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr);
    close(fd);
    clients_.erase(fd);
  }

  void handle_client(int fd, uint32_t events) {
    Request req;
    int passed = -1;
    ssize_t n = recv_msg_fd(fd, &req, sizeof(req), &passed, 0);
    if (n == -ETIMEDOUT && !(events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR))) return;
    if (n <= 0 || size_t(n) < sizeof(req)) {
      if (passed >= 0) close(passed);
      drop_client(fd);
      return;
    }
    auto reply = std::make_unique<Reply>();
    memset(reply.get(), 0, sizeof(Reply));
    int send_fd = -1;
    bool close_send_fd = false;  // send_fd is made for this reply
    size_t reply_len = offsetof(Reply, devices);
    Client& cl = clients_[fd];
    if (cl.refused) {
      if (passed >= 0) close(passed);
      reply->status = EACCES;
      (void)send_msg_fd(fd, reply.get(), reply_len, -1);
      drop_client(fd);
      return;
    }
    switch (MsgType(req.type)) {
      case MsgType::kHello: {
        if (req.version != control::kProtoVersion) {
          reply->status = EPROTO;
          break;
        }
        cl.pid = req.pid;
        auto devs = discover_devices();
        reply->num_devices = uint32_t(devs.size());
        for (size_t i = 0; i < devs.size(); ++i) reply->devices[i] = devs[i];
        reply_len = sizeof(Reply);
        send_fd = host_shm_fd_;
        break;
      }
      case MsgType::kRegisterCtx: {
        auto r = registry_.register_ctx(fd, cl.pid, passed);
        if (r.is_ok()) {
          reply->ctx_id = r.value();
          passed = -1;  // the registry owns it now
        } else {
          reply->status = r.err();
        }
        break;
      }
      case MsgType::kUnregisterCtx:
        registry_.unregister_ctx(fd, req.ctx_id);
        break;
      case MsgType::kAllocQpn: {
        auto r = registry_.alloc_qpn(fd, req.ctx_id, req.off, req.slot == 1);
        if (r.is_ok())
          reply->qpn = r.value();
        else
          reply->status = r.err();
        break;
      }
      case MsgType::kFreeQpn:
        registry_.free_qpn(fd, req.qpn);
        break;
      case MsgType::kAllocKey: {
        auto r = registry_.alloc_key(fd, req.ctx_id, req.slot);
        if (r.is_ok())
          reply->key = r.value();
        else
          reply->status = r.err();
        break;
      }
      case MsgType::kFreeKey:
        break;
      case MsgType::kResolveQpn: {
        auto r = registry_.resolve_qpn(req.qpn, req.slot == 1);
        if (r.is_ok()) {
          reply->pid = r->pid;
          reply->ctx_id = r->ctx_id;
          reply->off = r->qp_off;
          send_fd = r->memfd;
        } else {
          reply->status = r.err();
        }
        break;
      }
      case MsgType::kOpenXrcd:
        reply->key = registry_.open_xrcd(req.qpn, req.off);
        break;
      case MsgType::kPing:
        break;
      case MsgType::kIdWatch:
        send_fd = frames_.client_fd();
        close_send_fd = true;
        break;
      case MsgType::kLinger:
        if (passed >= 0) {
          lingers_.add(passed, req.qpn, req.arg[0], req.arg[1], req.arg[2], uint16_t(req.arg[3]), now_ns());
          if (lingers_.owns(passed)) add_fd(passed);
          passed = -1;  // Lingers owns it (closed already if it could not be used)
        }
        break;
      default:
        reply->status = EINVAL;
    }
    if (passed >= 0) close(passed);
    const bool sent = send_msg_fd(fd, reply.get(), reply_len, send_fd) >= 0;
    if (close_send_fd && send_fd >= 0) close(send_fd);
    if (!sent) drop_client(fd);
  }

  static constexpr uint64_t kRefusedLogged = 10;  // refusals logged, then only counted
  const long trusted_gid_ = trusted_gid_from_env();
  uint64_t refused_ = 0;
  int lsock_ = -1;
  int ep_ = -1;
  int host_shm_fd_ = -1;
  std::map<int, Client> clients_;
  Registry registry_;
  Lingers lingers_;
  FrameWatch frames_;
};

}  // namespace
}  // namespace uroce::daemon

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  uint64_t idle_ms = 3000;
  if (const char* s = getenv("UROCED_IDLE_MS")) idle_ms = strtoull(s, nullptr, 10);
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--idle-ms") && i + 1 < argc) idle_ms = strtoull(argv[++i], nullptr, 10);
  }
  uroce::daemon::Server s;
  return s.run(idle_ms);
}
