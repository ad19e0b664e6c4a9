#include "daemon/requests.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "common/log.h"
#include "daemon/peer_check.h"

namespace uroce::daemon {

using control::MsgType;
using control::Reply;
using control::Request;

Requests::Requests(int host_shm_fd, Hooks hooks, ClientLimits limits)
    : host_shm_fd_(host_shm_fd), hooks_(std::move(hooks)), limits_(limits) {}

bool Requests::open(int fd, pid_t pid, bool trusted) {
  if (clients_.size() >= limits_.connections) return false;
  uint32_t& of_pid = per_pid_[pid];
  if (of_pid >= limits_.connections_per_pid) return false;
  ++of_pid;
  Client& cl = clients_[fd];
  cl.pid = pid;
  cl.refused = !trusted;
  return true;
}

void Requests::close(int fd) {
  auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  registry_.client_gone(fd);
  if (hooks_.xdp) hooks_.xdp->client_gone(fd);
  auto p = per_pid_.find(it->second.pid);
  if (p != per_pid_.end() && --p->second == 0) per_pid_.erase(p);
  clients_.erase(it);
}

namespace {
/// True if `fd` is a UDP socket (kLinger passes one connected to the peer;
/// Lingers::add checks that).
bool is_udp_socket(int fd) {
  int type = 0, domain = 0;
  socklen_t l = sizeof(type);
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) != 0 || type != SOCK_DGRAM) return false;
  l = sizeof(domain);
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l) != 0) return false;
  return domain == AF_INET || domain == AF_INET6;
}
}  // namespace

void Requests::linger(const Request& req, int passed) {
  if (lingers_.size() >= limits_.lingers || !is_udp_socket(passed)) {
    ::close(passed);  // best effort: the peer's retransmissions then go unanswered
    return;
  }
  LingerArgs a;
  a.qpn = req.qpn;
  a.dest_qpn = req.arg[0];
  a.epsn = req.arg[1];
  a.msn = req.arg[2];
  a.sport = uint16_t(req.arg[3]);
  a.xrc = req.slot == 1;
  lingers_.add(passed, a, now_ns());
  if (lingers_.owns(passed) && hooks_.watch) hooks_.watch(passed);
}

Requests::Answer Requests::raw_rule(int fd, const control::RawRuleRequest& m) {
  Answer a;
  a.reply = std::make_unique<Reply>();
  memset(a.reply.get(), 0, sizeof(Reply));
  a.len = offsetof(Reply, devices);
  Reply* reply = a.reply.get();
  if (!hooks_.xdp) {
    reply->status = EOPNOTSUPP;
  } else if (m.req.arg[1] && !peer_has_net_raw(fd, clients_[fd].pid)) {
    // As the kernel asks at every ibv_create_flow.
    reply->status = EPERM;
  } else {
    reply->status = hooks_.xdp->raw_rule(fd, m.req.arg[0], m.req.off, m.val, m.mask, m.req.arg[1] != 0).err();
  }
  return a;
}

void Requests::alloc_qpns(int fd, const control::Request& req, uint32_t ctx_id, control::Reply* reply) {
  // A batch: QPNs for the QPs at off, off + stride, ... (as many as the
  // client's share allows, at least one).
  const uint32_t n = std::clamp<uint32_t>(req.arg[0], 1, control::kQpnBatchMax);
  auto r = registry_.alloc_qpns(fd, ctx_id, req.off, n > 1 ? req.arg[1] : 0, n, req.slot == 1, reply->qpns);
  if (!r.is_ok()) {
    reply->status = r.err();
    return;
  }
  reply->qpn = reply->qpns[0];
  reply->key = r.value();
}

Requests::Answer Requests::handle(int fd, const void* msg, size_t len, int passed) {
  Answer a;
  auto it = clients_.find(fd);
  if (it != clients_.end() && len == sizeof(control::RawRuleRequest) && !it->second.refused) {
    control::RawRuleRequest m;
    memcpy(&m, msg, sizeof(m));
    if (MsgType(m.req.type) == MsgType::kRawRule) {
      if (passed >= 0) ::close(passed);
      return raw_rule(fd, m);
    }
  }
  if (it == clients_.end() || len != sizeof(Request)) {
    // Not a request of this protocol (truncated, oversized): the client
    // is confused or hostile; either way the conversation is over.
    if (passed >= 0) ::close(passed);
    a.send = false;
    a.drop = true;
    return a;
  }
  Request req;
  memcpy(&req, msg, sizeof(req));
  Client& cl = it->second;
  a.reply = std::make_unique<Reply>();
  memset(a.reply.get(), 0, sizeof(Reply));
  Reply* reply = a.reply.get();
  a.len = offsetof(Reply, devices);
  if (cl.refused) {
    if (passed >= 0) ::close(passed);
    reply->status = EACCES;
    a.drop = true;
    return a;
  }
  switch (MsgType(req.type)) {
    case MsgType::kHello: {
      if (req.version != control::kProtoVersion) {
        reply->status = EPROTO;
        break;
      }
      auto devs = hooks_.devices ? hooks_.devices() : std::vector<core::DeviceInfo>{};
      if (devs.size() > core::kMaxDevices) devs.resize(core::kMaxDevices);
      reply->num_devices = uint32_t(devs.size());
      for (size_t i = 0; i < devs.size(); ++i) reply->devices[i] = devs[i];
      a.len = sizeof(Reply);
      a.fd = host_shm_fd_;
      break;
    }
    case MsgType::kRegisterCtx: {
      // The pid is the one the kernel vouches for (SO_PEERCRED), not what
      // the client says.
      auto r = registry_.register_ctx(fd, cl.pid, passed);
      passed = -1;  // the registry owns it now (and closed it on failure)
      if (r.is_ok()) {
        reply->ctx_id = r.value();
        // With the context, its first batch of QPNs (if it asked: arg[0]).
        if (req.arg[0]) alloc_qpns(fd, req, r.value(), reply);
        reply->status = 0;  // the context stands even if the batch was refused
      } else {
        reply->status = r.err();
      }
      break;
    }
    case MsgType::kUnregisterCtx:
      registry_.unregister_ctx(fd, req.ctx_id);
      break;
    case MsgType::kAllocQpn:
      alloc_qpns(fd, req, req.ctx_id, reply);
      break;
    case MsgType::kFreeQpn:
      if (hooks_.xdp && registry_.owns_qpn(fd, req.qpn)) hooks_.xdp->qpn_freed(fd, req.qpn);
      registry_.free_qpn(fd, req.qpn);
      a.send = false;  // posted: the client goes on without an answer
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
        a.fd = r->memfd;
      } else {
        reply->status = r.err();
      }
      break;
    }
    case MsgType::kOpenXrcd: {
      auto r = registry_.open_xrcd(fd, req.qpn, req.off);
      if (r.is_ok())
        reply->key = r.value();
      else
        reply->status = r.err();
      break;
    }
    case MsgType::kPing:
      break;
    case MsgType::kIdWatch:
      a.fd = hooks_.id_watch_fd ? hooks_.id_watch_fd() : -1;
      a.close_fd = true;
      break;
    case MsgType::kQpDirectory:
      a.fd = registry_.directory_fd();
      break;
    case MsgType::kReport:
      a.fd = registry_.report(getpid());
      a.close_fd = true;
      if (a.fd < 0) reply->status = EIO;
      break;
    case MsgType::kXskOpen: {
      if (!hooks_.xdp) {
        reply->status = EOPNOTSUPP;
        break;
      }
      // Only a device's interface (never loopback: its devices use shared memory).
      bool device = false;
      if (hooks_.devices)
        for (const core::DeviceInfo& d : hooks_.devices())
          device |= d.ifindex == req.arg[0] && !d.is_loopback;
      if (!device) {
        reply->status = ENODEV;
        break;
      }
      auto r = hooks_.xdp->open(fd, req.arg[0]);
      if (r.is_ok()) {
        a.fd = r.value();
        a.close_fd = true;
      } else {
        reply->status = r.err();
      }
      break;
    }
    case MsgType::kXskReady:
      reply->status = hooks_.xdp ? hooks_.xdp->ready(fd, req.arg[0]).err() : EOPNOTSUPP;
      break;
    case MsgType::kXskSteer:
      if (!hooks_.xdp)
        reply->status = EOPNOTSUPP;
      else if (req.arg[1] && !registry_.owns_qpn(fd, req.qpn))
        reply->status = EPERM;  // another process's QP: never steered to this one
      else
        reply->status = hooks_.xdp->steer(fd, req.arg[0], req.qpn, req.arg[1] != 0).err();
      break;
    case MsgType::kRawAccess:
      if (!peer_has_net_raw(fd, clients_[fd].pid)) {
        reply->status = EPERM;
        UROCE_WARN("process %d: raw Ethernet refused: no CAP_NET_RAW", int(clients_[fd].pid));
      }
      break;
    case MsgType::kLinger:
      if (passed >= 0) linger(req, passed);
      passed = -1;
      break;
    default:
      reply->status = EINVAL;
  }
  if (passed >= 0) ::close(passed);  // a descriptor the request does not take
  return a;
}

}  // namespace uroce::daemon
