#include "daemon/xdp_ports.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

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

Status XdpPorts::raw_rule(int client, uint32_t ifindex, uint64_t id, const wire::FlowKey& val,
                          const wire::FlowKey& mask, bool on) {
  auto it = ports_.find(ifindex);
  if (it == ports_.end() || it->second.client != client) return Status(EPERM);
  Port& p = it->second;
  auto at = p.raw_at.find(id);
  if (!on) {
    if (at == p.raw_at.end()) return Status(ENOENT);
    // The last rule moves into the hole: the count drops first, so the
    // program never matches a half-written entry, then the moved rule is
    // written where the removed one was.
    const uint32_t hole = at->second, last = uint32_t(p.raw.size() - 1);
    p.raw_at.erase(at);
    if (Status st = p.steer->set_raw_count(last); !st.is_ok()) return st;
    if (hole != last) {
      p.raw[hole] = p.raw[last];
      p.raw_at[p.raw[hole].first] = hole;
      if (Status st = p.steer->set_raw_rule(hole, p.raw[hole].second); !st.is_ok()) return st;
      if (Status st = p.steer->set_raw_count(last); !st.is_ok()) return st;
    }
    p.raw.pop_back();
    return Status::ok();
  }
  XdpSteer::RawRule r{};
  r.val = val;
  r.mask = mask;
  // Only masked bits: the program compares (key & mask) with val.
  auto* v = reinterpret_cast<uint8_t*>(&r.val);
  const auto* m = reinterpret_cast<const uint8_t*>(&r.mask);
  for (size_t i = 0; i < sizeof(r.val); ++i) v[i] &= m[i];
  if (at != p.raw_at.end()) {  // the same id again: the rule changes in place
    p.raw[at->second].second = r;
    return p.steer->set_raw_rule(at->second, r);
  }
  if (p.raw.size() >= XdpSteer::kMaxRawRules) return Status(ENOSPC);
  const uint32_t i = uint32_t(p.raw.size());
  if (Status st = p.steer->set_raw_rule(i, r); !st.is_ok()) return st;
  if (Status st = p.steer->set_raw_count(i + 1); !st.is_ok()) return st;
  p.raw.emplace_back(id, r);
  p.raw_at[id] = i;
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
