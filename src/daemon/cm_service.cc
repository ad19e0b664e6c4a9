#include "daemon/cm_service.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/log.h"

namespace uroce::daemon {
namespace {

using cmproto::Msg;
using cmproto::Op;

constexpr size_t kMaxQueued = 16384;  // events waiting for a slow reader, then it is dropped

// Addresses are kept as the bytes of a sockaddr_in or sockaddr_in6, not
// aligned for either: read and written through copies.
uint16_t family(const uint8_t* a) {
  sockaddr s{};
  memcpy(&s, a, sizeof(s));
  return s.sa_family;
}

uint16_t port(const uint8_t* a) {
  if (family(a) == AF_INET) {
    sockaddr_in in;
    memcpy(&in, a, sizeof(in));
    return ntohs(in.sin_port);
  }
  if (family(a) == AF_INET6) {
    sockaddr_in6 in;
    memcpy(&in, a, sizeof(in));
    return ntohs(in.sin6_port);
  }
  return 0;
}

void set_port(uint8_t* a, uint16_t p) {
  if (family(a) == AF_INET) {
    sockaddr_in in;
    memcpy(&in, a, sizeof(in));
    in.sin_port = htons(p);
    memcpy(a, &in, sizeof(in));
  } else if (family(a) == AF_INET6) {
    sockaddr_in6 in;
    memcpy(&in, a, sizeof(in));
    in.sin6_port = htons(p);
    memcpy(a, &in, sizeof(in));
  }
}

/// The address as 16 bytes (IPv4 mapped), and whether it is the wildcard.
void ip16(const uint8_t* a, uint8_t out[16], bool* any) {
  memset(out, 0, 16);
  if (family(a) == AF_INET) {
    sockaddr_in in;
    memcpy(&in, a, sizeof(in));
    out[10] = out[11] = 0xff;
    memcpy(out + 12, &in.sin_addr, 4);
    *any = in.sin_addr.s_addr == INADDR_ANY;
  } else {
    sockaddr_in6 in;
    memcpy(&in, a, sizeof(in));
    memcpy(out, &in.sin6_addr, 16);
    static const uint8_t zero[16] = {};
    *any = memcmp(out, zero, 16) == 0;
  }
}

/// The address as 16 bytes, and whether a bind to it takes every address
/// (the wildcard or a loopback address: the kernel's CM binds neither to a
/// device, and its listeners match requests to any address).
void bound16(const uint8_t* a, uint8_t out[16], bool* all) {
  ip16(a, out, all);
  static const uint8_t v6_loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  const bool v4_loopback = family(a) == AF_INET && out[12] == 127;
  *all = *all || v4_loopback || (family(a) == AF_INET6 && memcmp(out, v6_loopback, 16) == 0);
}

/// Whether two bound addresses overlap (same IP, or either takes all).
bool overlap(const uint8_t* a, const uint8_t* b) {
  uint8_t x[16], y[16];
  bool ax, ay;
  bound16(a, x, &ax);
  bound16(b, y, &ay);
  return ax || ay || memcmp(x, y, 16) == 0;
}

/// Port spaces whose "connections" are SIDR exchanges (UD QPs).
bool datagram(uint32_t ps) { return ps == cmproto::kPsUdp || ps == cmproto::kPsIpoib; }

}  // namespace

CmService::CmService(Hooks hooks, CmTiming timing) : hooks_(std::move(hooks)), timing_(timing) {}

CmTiming CmTiming::from_env() {
  CmTiming t;
  if (const char* s = getenv("UROCE_CM_RESPONSE_TIMEOUT"))
    t.response_timeout = uint8_t(std::min(31L, strtol(s, nullptr, 10)));
  if (const char* s = getenv("UROCE_CM_RETRIES"))
    t.max_retries = uint8_t(std::min(15L, strtol(s, nullptr, 10)));
  return t;
}

bool CmService::send(int fd, const Msg& m) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return false;
  Conn& c = it->second;
  if (c.out.empty()) {
    ssize_t n = ::send(fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == ssize_t(sizeof(m))) return true;
    if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
      drops_.insert(fd);
      return false;
    }
    hooks_.want_write(fd, true);
  }
  if (c.out.size() >= kMaxQueued) {
    UROCE_WARN("uroced cm: pid %d reads no events (%zu waiting); dropping it", int(c.pid), c.out.size());
    drops_.insert(fd);
    return false;
  }
  c.out.push_back(m);
  return true;
}

void CmService::on_writable(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  while (!c.out.empty()) {
    ssize_t n = ::send(fd, &c.out.front(), sizeof(Msg), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n != ssize_t(sizeof(Msg))) {
      drops_.insert(fd);
      return;
    }
    c.out.pop_front();
  }
  hooks_.want_write(fd, false);
}

void CmService::reply(int fd, const Msg& req, int status, const Msg* body) {
  if (req.seq == 0) return;  // posted: nobody waits for an answer
  Msg r = body ? *body : Msg{};
  r.op = req.op;
  r.seq = req.seq;
  r.status = status;
  if (!body) r.handle = req.handle;
  send(fd, r);
}

void CmService::event(uint64_t handle, uint32_t type, int status, const Msg* body) {
  auto it = ids_.find(handle);
  if (it == ids_.end()) return;
  Msg e = body ? *body : Msg{};
  e.op = uint32_t(Op::kEvent);
  e.seq = 0;
  e.handle = handle;
  e.event = type;
  e.status = status;
  send(it->second.conn, e);
}

void CmService::adopt(int fd, pid_t pid, const Msg& open) {
  Conn c{pid, {}, {}};
  int status = open.arg == cmproto::kVersion ? 0 : EPROTO;
  if (open.event == cmproto::kCallChannel) {
    // Only the process that opened the event connection may call for it.
    auto t = by_token_.find(open.listen_handle);
    if (t == by_token_.end() || conns_.at(t->second).pid != pid)
      status = EPERM;
    else
      c.events_of = open.listen_handle;
  } else {
    do {
      if (getrandom(&c.token, sizeof(c.token), 0) != sizeof(c.token))
        c.token = next_handle_ * 0x9E3779B97F4A7C15ull;
    } while (c.token == 0 || by_token_.count(c.token));
    by_token_[c.token] = fd;
  }
  conns_[fd] = std::move(c);
  Msg r{};
  r.op = open.op;
  r.seq = open.seq;
  r.status = status;
  r.handle = conns_.at(fd).token;
  send(fd, r);
  if (status == EPERM) drops_.insert(fd);
}

int CmService::owner_of(int fd) const {
  const Conn& c = conns_.at(fd);
  if (!c.events_of) return fd;
  auto t = by_token_.find(c.events_of);
  return t == by_token_.end() ? -1 : t->second;
}

int CmService::bind(Id& id, uint64_t handle, uint8_t* addr) {
  if (family(addr) != AF_INET && family(addr) != AF_INET6) return EAFNOSUPPORT;
  auto taken = [&](uint16_t p) {
    for (const auto& [h, other] : ids_) {
      if (h == handle || !other.bound || other.ps != id.ps || port(other.addr) != p) continue;
      if (overlap(other.addr, addr)) return true;
    }
    return false;
  };
  uint16_t p = port(addr);
  if (p == 0) {
    // An ephemeral port from the kernel's default local range, free for this port space.
    uint32_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != sizeof(r)) r = uint32_t(next_handle_ * 7919);
    for (uint32_t i = 0; i < 28232 && p == 0; ++i) {
      const uint16_t c = uint16_t(32768 + (r + i) % 28232);
      if (!taken(c)) p = c;
    }
    if (p == 0) return EADDRINUSE;
    set_port(addr, p);
  } else if (taken(p)) {
    return EADDRINUSE;
  }
  memcpy(id.addr, addr, sizeof(id.addr));
  id.bound = true;
  return 0;
}

uint64_t CmService::find_listener(uint32_t ps, const uint8_t* dst) const {
  uint64_t wildcard = 0;
  uint8_t want[16];
  bool any;
  ip16(dst, want, &any);
  for (const auto& [h, id] : ids_) {
    if (id.state != State::kListening || id.ps != ps || port(id.addr) != port(dst)) continue;
    uint8_t have[16];
    bool lany;
    bound16(id.addr, have, &lany);
    if (lany) {
      // An IPv4 wildcard takes IPv4 only; an IPv6 one takes both.
      if (family(id.addr) == AF_INET6 || family(dst) == AF_INET) wildcard = h;
    } else if (memcmp(have, want, 16) == 0) {
      return h;
    }
  }
  return wildcard;
}

void CmService::connect(int fd, const Msg& m, uint64_t now_ns) {
  reply(fd, m, 0);
  ids_.at(m.handle).state = State::kConnecting;
  // Another host's address goes on the wire, even if a listener of this
  // host on the wildcard address would take the port.
  if (!local_address(m.dst, now_ns)) {
    wire_connect(m.handle, m, now_ns);
    return;
  }
  if (deliver(m, now_ns)) return;
  UROCE_INFO("uroced cm: a connect to port %u of this host waits for its listener", unsigned(port(m.dst)));
  // No listener yet: the request waits a moment, as one on the wire would
  // be in flight, then is rejected (reason 8, as a kernel's CM answers).
  // Programs start their client right after the server has answered them
  // on a socket of their own, before it listens (perftest's -R does).
  pending_.push_back(Pending{m, now_ns + kNoListenerWaitNs});
}

bool CmService::local_address(const uint8_t* a, uint64_t now_ns) {
  std::array<uint8_t, 16> want;
  bool any;
  ip16(a, want.data(), &any);
  // Loopback (127/8, ::1) is this host whatever the interfaces say.
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static constexpr uint8_t kLoop6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  if ((memcmp(want.data(), kMapped, 12) == 0 && want[12] == 127) || memcmp(want.data(), kLoop6, 16) == 0)
    return true;
  // The interfaces' addresses, read again at most once a second (a connect
  // should not cost a netlink dump).
  if (local_ips_at_ == 0 || now_ns - local_ips_at_ > 1'000'000'000ull) {
    local_ips_.clear();
    ifaddrs* all = nullptr;
    if (getifaddrs(&all) == 0) {
      for (ifaddrs* i = all; i; i = i->ifa_next) {
        if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
          continue;
        uint8_t tmp[28] = {};
        memcpy(tmp, i->ifa_addr,
               i->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
        std::array<uint8_t, 16> ip;
        bool any;
        ip16(tmp, ip.data(), &any);
        local_ips_.push_back(ip);
      }
      freeifaddrs(all);
    }
    local_ips_at_ = now_ns;
  }
  for (const auto& ip : local_ips_)
    if (ip == want) return true;
  return false;
}

uint64_t CmService::next_deadline_ns() const {
  uint64_t next = timers_.empty() ? UINT64_MAX : timers_.begin()->first;
  if (!unanswered_.empty()) next = std::min(next, unanswered_.begin()->first);
  for (const Pending& p : pending_) next = std::min(next, p.deadline_ns);
  for (const WirePending& p : wire_pending_) next = std::min(next, p.deadline_ns);
  return next;
}

void CmService::expire_unanswered(uint64_t now_ns) {
  while (!unanswered_.empty() && unanswered_.begin()->first <= now_ns) {
    const uint64_t ch = unanswered_.begin()->second;
    unanswered_.erase(unanswered_.begin());
    auto c = ids_.find(ch);
    if (c == ids_.end() || c->second.state != State::kConnecting || c->second.peer == 0) continue;
    auto s = ids_.find(c->second.peer);
    if (s == ids_.end() || s->second.state != State::kRequested) continue;  // answered
    c->second.state = State::kGone;
    unlink(ch, cmproto::kEvRejected, cmproto::kRejTimeout);
    event(ch, cmproto::kEvUnreachable, -ETIMEDOUT);
  }
}

void CmService::expire(uint64_t now_ns) {
  wire_expire(now_ns);
  expire_unanswered(now_ns);
  retry_wire_pending(now_ns, true);
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->deadline_ns > now_ns) {
      ++it;
      continue;
    }
    const uint64_t h = it->req.handle;
    it = pending_.erase(it);
    auto id = ids_.find(h);
    if (id == ids_.end()) continue;
    id->second.state = State::kGone;
    if (datagram(id->second.ps)) {
      event(h, cmproto::kEvUnreachable,
            cmproto::kSidrNoService);  // as the kernel reports a SIDR REP's status
    } else {
      event(h, cmproto::kEvRejected, cmproto::kRejInvalidServiceId);
    }
  }
}

bool CmService::deliver(const Msg& m, uint64_t now_ns) {
  Id& c = ids_.at(m.handle);
  const uint64_t lh = find_listener(c.ps, m.dst);
  if (lh == 0) return false;
  const Id& listener = ids_.at(lh);
  if (conns_.at(listener.conn).ids.size() >= kMaxIdsPerConn) {
    c.state = State::kGone;
    event(m.handle, cmproto::kEvRejected, cmproto::kRejConsumer);
    return true;
  }
  const uint64_t sh = next_handle_++;
  Id s(listener.conn, c.ps, State::kRequested);
  memcpy(s.addr, m.dst, sizeof(s.addr));
  s.peer = m.handle;
  ids_.emplace(sh, std::move(s));
  conns_.at(listener.conn).ids.insert(sh);
  c.peer = sh;
  // The request as the listener's side sees it: its address is the source.
  Msg req = m;
  memcpy(req.src, m.dst, sizeof(req.src));
  memcpy(req.dst, m.src, sizeof(req.dst));
  memcpy(req.sgid, m.dgid, sizeof(req.sgid));
  memcpy(req.dgid, m.sgid, sizeof(req.dgid));
  req.listen_handle = lh;
  req.ps = c.ps;
  event(sh, cmproto::kEvConnectRequest, 0, &req);
  unanswered_.emplace(now_ns + give_up_ns(), m.handle);
  return true;
}

void CmService::unlink(uint64_t handle, uint32_t peer_event, int status) {
  auto it = ids_.find(handle);
  if (it == ids_.end() || it->second.peer == 0) return;
  const uint64_t ph = it->second.peer;
  it->second.peer = 0;
  auto pit = ids_.find(ph);
  if (pit == ids_.end()) return;
  pit->second.peer = 0;
  pit->second.state = State::kGone;
  event(ph, peer_event, status);
}

void CmService::destroy(uint64_t handle) {
  auto it = ids_.find(handle);
  if (it == ids_.end()) return;
  const Id& id = it->second;
  if (id.remote) wire_end(handle, 0, false);
  if (id.peer) {
    const bool connected = id.state == State::kConnected || id.state == State::kAccepted;
    // A client that goes before the answer: the server sees the request time
    // out; a server that goes before answering: the client sees it refused.
    const int reason = id.state == State::kConnecting ? cmproto::kRejTimeout : cmproto::kRejConsumer;
    unlink(handle, connected ? cmproto::kEvDisconnected : cmproto::kEvRejected, connected ? 0 : reason);
  }
  auto cit = conns_.find(it->second.conn);
  if (cit != conns_.end()) cit->second.ids.erase(handle);
  ids_.erase(it);
  for (auto p = pending_.begin(); p != pending_.end();)
    p = p->req.handle == handle ? pending_.erase(p) : std::next(p);
}

void CmService::on_message(int fd, const void* buf, size_t len, uint64_t now_ns) {
  if (len != sizeof(Msg)) {
    drops_.insert(fd);
    return;
  }
  Msg m;
  memcpy(&m, buf, sizeof(m));
  // A call channel acts for its event connection: the ids are that one's.
  const int owner = owner_of(fd);
  if (owner < 0) {
    drops_.insert(fd);
    return;
  }
  Conn& conn = conns_.at(owner);
  const Op op = Op(m.op);
  if (op == Op::kCreateId) {
    if (conn.ids.size() >= kMaxIdsPerConn) {
      reply(fd, m, ENOMEM);
      return;
    }
    const uint64_t h = next_handle_++;
    ids_.emplace(h, Id(owner, m.ps));
    conn.ids.insert(h);
    Msg r{};
    r.handle = h;
    reply(fd, m, 0, &r);
    return;
  }
  auto it = ids_.find(m.handle);
  if (it == ids_.end() || it->second.conn != owner) {
    reply(fd, m, EINVAL);
    return;
  }
  Id& id = it->second;
  switch (op) {
    case Op::kDestroyId:
      destroy(m.handle);
      reply(fd, m, 0);
      break;
    case Op::kBind: {
      if (id.bound || id.state != State::kIdle) {
        reply(fd, m, EINVAL);
        break;
      }
      Msg r = m;
      const int rc = bind(id, m.handle, r.src);
      if (rc == 0) id.state = State::kBound;
      reply(fd, m, rc, &r);
      break;
    }
    case Op::kListen:
      if (!id.bound || (id.state != State::kBound && id.state != State::kListening)) {
        reply(fd, m, EINVAL);
        break;
      }
      id.state = State::kListening;
      reply(fd, m, 0);
      // Requests that came before the listener.
      for (auto p = pending_.begin(); p != pending_.end();)
        p = deliver(p->req, now_ns) ? pending_.erase(p) : std::next(p);
      retry_wire_pending(now_ns, false);
      break;
    case Op::kConnect:
      if (!id.bound || id.state != State::kBound) {
        reply(fd, m, EINVAL);
        break;
      }
      connect(fd, m, now_ns);
      break;
    case Op::kAccept: {
      if (id.state != State::kRequested || (id.peer == 0 && !id.remote)) {
        reply(fd, m, EINVAL);
        break;
      }
      reply(fd, m, 0);
      if (id.remote) {
        wire_accept(m.handle, m, now_ns);
        break;
      }
      Msg rep = m;
      const uint64_t ph = id.peer;
      if (datagram(id.ps)) {
        // SIDR: the answer is all there is; nothing stays connected.
        id.peer = 0;
        id.state = State::kGone;
        auto pit = ids_.find(ph);
        if (pit != ids_.end()) {
          pit->second.peer = 0;
          pit->second.state = State::kGone;
        }
      } else {
        id.state = State::kAccepted;
      }
      event(ph, cmproto::kEvConnectResponse, 0, &rep);
      break;
    }
    case Op::kReject: {
      if (id.state != State::kRequested || (id.peer == 0 && !id.remote)) {
        reply(fd, m, EINVAL);
        break;
      }
      if (id.remote) {
        reply(fd, m, 0);
        wire_reject(m.handle, m);
        break;
      }
      const uint64_t ph = id.peer;
      id.peer = 0;
      id.state = State::kGone;
      auto pit = ids_.find(ph);
      if (pit != ids_.end()) {
        pit->second.peer = 0;
        pit->second.state = State::kGone;
      }
      reply(fd, m, 0);
      Msg rej = m;
      if (datagram(id.ps)) {
        // A SIDR reply that refuses: the kernel's CM reports it so.
        event(ph, cmproto::kEvUnreachable, cmproto::kSidrRejected, &rej);
      } else {
        event(ph, cmproto::kEvRejected, cmproto::kRejConsumer, &rej);
      }
      break;
    }
    case Op::kEstablish: {
      if (id.remote) {
        if (id.state != State::kConnecting || !id.remote->answered) {
          reply(fd, m, EINVAL);
          break;
        }
        reply(fd, m, 0);
        wire_establish(m.handle);
        break;
      }
      auto pit = id.peer ? ids_.find(id.peer) : ids_.end();
      if (id.state != State::kConnecting || pit == ids_.end() || pit->second.state != State::kAccepted) {
        reply(fd, m, EINVAL);
        break;
      }
      id.state = State::kConnected;
      pit->second.state = State::kConnected;
      reply(fd, m, 0);
      event(id.peer, cmproto::kEvEstablished, 0);
      break;
    }
    case Op::kDisconnect: {
      if (id.remote && id.state != State::kGone) {
        const bool connected = id.state == State::kConnected || id.state == State::kAccepted;
        wire_end(m.handle, now_ns, true);
        reply(fd, m, 0);
        if (connected) event(m.handle, cmproto::kEvDisconnected, 0);
        break;
      }
      if (id.peer == 0) {
        // Disconnected already (0, as the kernel answers), or never connected.
        reply(fd, m, id.state == State::kGone ? 0 : EINVAL);
        break;
      }
      const bool connected = id.state == State::kConnected || id.state == State::kAccepted;
      id.state = State::kGone;
      unlink(m.handle, connected ? cmproto::kEvDisconnected : cmproto::kEvRejected,
             connected ? 0 : cmproto::kRejConsumer);
      reply(fd, m, 0);
      if (connected) event(m.handle, cmproto::kEvDisconnected, 0);
      break;
    }
    default:
      reply(fd, m, EINVAL);
      break;
  }
}

void CmService::close(int fd) {
  drops_.erase(fd);
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  // An event connection's call channel then has no one to act for: its
  // next message drops it (owner_of).
  if (it->second.token) by_token_.erase(it->second.token);
  const std::set<uint64_t> ids = it->second.ids;
  conns_.erase(it);  // no event goes to a closed client
  for (uint64_t h : ids) destroy(h);
}

}  // namespace uroce::daemon
