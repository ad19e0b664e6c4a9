// A QP's network engine from its move to RTR to its close: the sockets,
// the AF_XDP route, the responder and requester, multicast groups, and the
// hand-off of its receive socket to uroced's linger.
#include <cstring>

#include "common/log.h"
#include "link/neighbor.h"
#include "net/net_engine.h"
#include "net/net_qp.h"
#include "net/net_route.h"
#include "wire/ip_udp.h"  // kRoceV2Port

namespace uroce::core {

namespace {

// How long a QP waits at RTR for the kernel to resolve its peer's MAC
// (ARP / neighbour discovery) before it stays on its UDP socket.
constexpr int kNeighborWaitMs = 200;

/// A QP's sending socket at `ip`:`sport` (flows of this host that hash to
/// the same port share it), with the process's fault injector, its stream
/// distinct and reproducible per QP (`salt`), and capture.
link::UdpEndpoint::Options sender(const link::IpAddr& ip, uint16_t sport, uint32_t salt,
                                  const NetLinkSettings& link) {
  link::UdpEndpoint::Options o;
  o.bind = link::UdpAddr{ip, sport};
  o.reuse_addr = true;
  o.faults = link.faults;
  o.faults.seed = link.faults.seed * 1000003u + salt;
  o.capture_to = link.capture;
  return o;
}

/// A QP's receiving socket at `ip`:4791 (a group's too), shared with the host's other QPs.
link::UdpEndpoint::Options receiver(const link::IpAddr& ip, const NetLinkSettings& link) {
  link::UdpEndpoint::Options o;
  o.bind = link::UdpAddr{ip, wire::kRoceV2Port};
  o.reuse_addr = true;
  o.capture_to = link.capture;
  return o;
}

}  // namespace

Result<std::unique_ptr<NetQp>> NetQp::open(const Setup& s, QpOwner* owner) {
  std::unique_ptr<NetQp> q(new NetQp());
  q->owner_ = owner;
  q->type_ = s.type;
  q->qpn_ = s.qpn;
  q->dev_ = s.dev;
  q->ctl_ = s.ctl;
  q->self_ = s.self;
  q->host_ = s.host;
  q->counters_ = s.counters;
  if (Status st = q->open_sockets(s); !st.is_ok()) return st;
  NetEngine& e = NetEngine::get();
  if (Status st = e.add(q.get()); !st.is_ok()) return st;
  // From here on the engine reads the QP: undone by remove() on failure.
  auto undo = [&](Status st) {
    e.remove(q.get());
    return st;
  };
  if (s.type != QpType::kUd)
    if (Status st = q->route_xdp(s); !st.is_ok()) return undo(st);
  if (s.type == QpType::kUd) {
    std::vector<link::IpAddr> more = ud_addresses(*s.dev);
    for (size_t i = 1; i < more.size(); ++i)
      if (Status st = q->add_address(more[i]); !st.is_ok())
        // (The loopback device's link-local GID is no address of lo's.)
        UROCE_INFO("UD QP %u: not receiving at %s (%s)", s.qpn, link::to_string(more[i]).c_str(),
                   strerror(st.err()));
  }
  if (s.groups)
    for (uint32_t g : *s.groups)
      if (Status st = q->join(g); !st.is_ok()) return undo(st);
  return q;
}

Status NetQp::open_sockets(const Setup& s) {
  const DeviceInfo& d = *s.dev;
  const QpModifyArgs& a = *s.attr;
  link::IpAddr remote_ip;
  uint16_t peer_sport = 0;
  if (s.type == QpType::kUd) {
    const std::vector<link::IpAddr> addrs = ud_addresses(d);
    if (addrs.empty()) return Status(EINVAL);
    local_ip_ = addrs.front();
    sport_ = udp_sport(0, qpn_, 1);  // one port per UD QP
  } else {
    if (!unicast_addr(d.gids[a.av.sgid_index], d, &local_ip_) || !unicast_addr(a.av.dgid, d, &remote_ip))
      return Status(EINVAL);
    // One family end to end (an IPv4 socket cannot reach an IPv6 address).
    if (local_ip_.is_v4() != remote_ip.is_v4()) return Status(EINVAL);
    sport_ = peer_sport = udp_sport(a.av.flow_label, qpn_, a.dest_qpn);
    if (local_ip_ == remote_ip && qpn_ != a.dest_qpn) {
      // Both ends on this host (UROCE_LINK=udp): with one port the two
      // directions would be the same 4-tuple and neither connected socket
      // could tell its flow; the QP with the higher number sends from the
      // next port.
      if (qpn_ > a.dest_qpn)
        sport_ ^= 1;
      else
        peer_sport ^= 1;
    }
  }
  pmtu_ = path_mtu_bytes(a.path_mtu, d.if_mtu);
  resp_cfg_.dest_qp = a.dest_qpn;
  peer_qpn_ = a.dest_qpn;  // (ask_caps, on_caps)
  resp_cfg_.epsn = a.rq_psn;
  resp_cfg_.min_rnr_timer = a.min_rnr_timer;
  resp_cfg_.max_dest_rd_atomic = a.max_dest_rd_atomic ? a.max_dest_rd_atomic : 1;
  peer_ = link::UdpAddr{remote_ip, wire::kRoceV2Port};
  const NetLinkSettings& link = NetEngine::get().settings();
  link::UdpEndpoint::Options tx = sender(local_ip_, sport_, qpn_, link);
  // A connection's packets are ECN-capable while its requester reacts to
  // what the marks cause (CNPs; transport/congestion.h).
  tx.ecn = s.type != QpType::kUd && link.cc.enabled;
  auto t = link::UdpEndpoint::open(tx);
  if (!t.is_ok()) {
    UROCE_ERR("QP %u: cannot bind UDP [%s]:%u (%s)", qpn_, link::to_string(local_ip_).c_str(), sport_,
              strerror(t.err()));
    return Status(t.err());
  }
  tx_ = std::move(t.value());
  link::UdpEndpoint::Options rx = receiver(local_ip_, link);
  if (s.type != QpType::kUd) {
    rx.connect_to = link::UdpAddr{remote_ip, peer_sport};
    // The requester's round trips end at the kernel's receive time of the
    // ACK, not when the process got to it (transport/congestion.h).
    rx.timestamps = s.type == QpType::kRc || s.type == QpType::kXrcSend;
    rx.ecn = true;  // a request marked CE earns its requester a CNP
  }
  auto r = link::UdpEndpoint::open(rx);
  if (!r.is_ok()) {
    UROCE_ERR("QP %u: cannot bind UDP port %u (%s)", qpn_, wire::kRoceV2Port, strerror(r.err()));
    return Status(r.err());
  }
  rx_ = std::move(r.value());
  count(tx_.get());
  count(rx_.get());
  make_responder();
  return Status::ok();
}

Status NetQp::route_xdp(const Setup& s) {
  const DeviceInfo& d = *s.dev;
  NetEngine& e = NetEngine::get();
  const bool required = e.settings().xdp == XdpUse::kRequired;
  link::XdpPort* port = e.xdp_port(d, ctl_);
  if (!port) return Status(required ? EOPNOTSUPP : 0);
  // The frames' destination: the kernel's neighbour for the peer (a peer
  // it cannot reach through this interface, e.g. one of this host's own
  // addresses, stays on the UDP socket).
  const link::IpAddr& remote = peer_.ip;
  auto mac = link::resolve_neighbor(remote, d.ifindex, kNeighborWaitMs);
  if (!mac.is_ok()) {
    UROCE_INFO("QP %u: UDP socket, not AF_XDP: no neighbour for %s on %s (%s)", qpn_,
               link::to_string(remote).c_str(), d.ifname, strerror(mac.err()));
    return Status(required ? EOPNOTSUPP : 0);
  }
  if (Status st = ctl_->xsk_steer(d.ifindex, qpn_, true); !st.is_ok()) {
    UROCE_INFO("QP %u: UDP socket, not AF_XDP: uroced did not steer it (%s)", qpn_, strerror(st.err()));
    return Status(required ? EOPNOTSUPP : 0);
  }
  Guard<AdaptiveLock> g(mu_);
  xdp_ = port;
  peer_mac_ = mac.value();
  local_ = link::UdpAddr{local_ip_, sport_};
  return Status::ok();
}

void NetQp::close(bool linger) {
  NetEngine::get().remove(this);
  flush_acks();
  flush_link();
  // The peer may still retransmit what was executed (its ACK lost): uroced
  // answers for a while (daemon/linger.h). The socket is passed (SCM_RIGHTS)
  // before ours closes, so no datagram of the flow finds no socket.
  uint32_t epsn, msn;
  {
    Guard<AdaptiveLock> g(mu_);
    if (!linger || !rc_resp_ || rc_resp_->epsn() == resp_cfg_.epsn) return;  // nothing executed
    epsn = rc_resp_->epsn();
    msn = rc_resp_->msn();
  }
  ctl_->linger(rx_->fd(), qpn_, resp_cfg_.dest_qp, epsn, msn, sport_, type_ == QpType::kXrcRecv);
}

void NetQp::count(link::UdpEndpoint* e) {
  // (A receiving socket sends nothing: its fault injector never runs.)
  if (NetCounters* k = counters_) e->count_into(&k->udp, &k->id, &k->faults);
}

Status NetQp::join(uint32_t group) {
  // Every member of the host binds <group>:4791.
  link::UdpEndpoint::Options o = receiver(link::IpAddr::v4(group), NetEngine::get().settings());
  o.join_on = local_ip_.ip4();
  if (!o.join_on) return Status(EINVAL);  // IPv4 groups only
  auto r = link::UdpEndpoint::open(o);
  if (!r.is_ok()) return Status(r.err());
  if (Status st = NetEngine::get().add_socket(this, r.value().get(), true); !st.is_ok()) return st;
  count(r.value().get());
  groups_.push_back(Group{group, std::move(r.value())});
  return Status::ok();
}

void NetQp::leave(uint32_t group) {
  for (auto it = groups_.begin(); it != groups_.end(); ++it)
    if (it->ip == group) {
      NetEngine::get().remove_socket(it->rx.get());
      groups_.erase(it);
      return;
    }
}

Status NetQp::add_address(const link::IpAddr& ip) {
  const NetLinkSettings& link = NetEngine::get().settings();
  auto t = link::UdpEndpoint::open(sender(ip, sport_, qpn_ + 1, link));
  if (!t.is_ok()) return Status(t.err());
  auto r = link::UdpEndpoint::open(receiver(ip, link));
  if (!r.is_ok()) return Status(r.err());
  if (Status st = NetEngine::get().add_socket(this, r.value().get(), false); !st.is_ok()) return st;
  Guard<AdaptiveLock> g(mu_);
  count(t.value().get());
  count(r.value().get());
  more_.push_back(Address{ip, std::move(t.value()), std::move(r.value())});
  return Status::ok();
}

}  // namespace uroce::core
