#include "daemon/xdp_ports.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

#ifndef AF_XDP
#define AF_XDP 44
#endif

namespace uroce::daemon {

XdpPorts::~XdpPorts() {
  while (!ports_.empty()) release(ports_.begin());
}

Result<int> XdpPorts::open(int client, uint32_t ifindex) {
  if (ports_.count(ifindex)) return Status(EBUSY);
  auto steer = XdpSteer::attach(int(ifindex), mode_);
  if (!steer.is_ok()) {
    const int e = steer.err();
    if ((e == EPERM || e == EACCES) && !said_eperm_) {
      said_eperm_ = true;
      UROCE_WARN(
          "AF_XDP link unavailable: loading the XDP program needs CAP_BPF and CAP_NET_ADMIN (root, or setcap "
          "on uroced); processes use UDP sockets");
    } else if (e != EPERM && e != EACCES) {
      UROCE_INFO("AF_XDP link: no XDP program on interface %u (%s)", ifindex, strerror(e));
    }
    return Status(e == EACCES ? EPERM : e);
  }
  const int fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    const int e = errno;
    if (e == EPERM && !said_eperm_) {
      said_eperm_ = true;
      UROCE_WARN("AF_XDP link unavailable: AF_XDP sockets need CAP_NET_RAW; processes use UDP sockets");
    }
    return Status(e);
  }
  const int lent = fcntl(fd, F_DUPFD_CLOEXEC, 0);  // the copy the client gets
  if (lent < 0) {
    const int e = errno;
    ::close(fd);
    return Status(e);
  }
  Port& p = ports_[ifindex];
  p.client = client;
  p.xsk = fd;
  p.steer = std::move(steer.value());
  return lent;
}

Status XdpPorts::ready(int client, uint32_t ifindex) {
  auto it = ports_.find(ifindex);
  if (it == ports_.end() || it->second.client != client) return Status(EPERM);
  Port& p = it->second;
  // The kernel refuses a socket that is not bound (EINVAL); one bound to
  // another interface or queue gets nothing (the program's redirect then
  // fails and the frames go to the kernel).
  if (Status st = p.steer->set_socket(0, p.xsk); !st.is_ok()) return st;
  p.ready = true;
  return Status::ok();
}

Status XdpPorts::steer(int client, uint32_t ifindex, uint32_t qpn, bool on) {
  auto it = ports_.find(ifindex);
  if (it == ports_.end() || it->second.client != client) return Status(EPERM);
  Port& p = it->second;
  if (!on) {
    p.steer->unsteer(qpn);
    p.qpns.erase(qpn);
    return Status::ok();
  }
  if (Status st = p.steer->steer(qpn, 0); !st.is_ok()) return st;
  p.qpns.insert(qpn);
  return Status::ok();
}

void XdpPorts::qpn_freed(int client, uint32_t qpn) {
  for (auto& [ifindex, p] : ports_)
    if (p.client == client && p.qpns.erase(qpn)) p.steer->unsteer(qpn);
}

void XdpPorts::client_gone(int client) {
  for (auto it = ports_.begin(); it != ports_.end();) {
    auto next = std::next(it);
    if (it->second.client == client) release(it);
    it = next;
  }
}

void XdpPorts::release(std::map<uint32_t, Port>::iterator it) {
  Port& p = it->second;
  // Detaching the program (the bpf_link's end) sends everything to the
  // kernel again at once; the socket goes with the client's copy.
  p.steer.reset();
  if (p.xsk >= 0) ::close(p.xsk);
  ports_.erase(it);
}

}  // namespace uroce::daemon
