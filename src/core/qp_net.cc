// A connected QP on the network link: when it goes there, and the glue
// between core::Qp (verbs, queues, CQs) and NetQp (the RC / UC
// state machines on UDP). See docs/network-link.md.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "common/iov.h"
#include "common/log.h"
#include "core/control_client.h"
#include "core/limits.h"
#include "core/net_engine.h"
#include "core/net_qp.h"
#include "core/peer_map.h"
#include "core/qp.h"
#include "core/wr.h"
#include "link/neighbor.h"
#include "link/xdp_link.h"
#include "transport/timers.h"

namespace uroce::core {

namespace {
// How long a QP waits at RTR for the kernel to resolve its peer's MAC
// (ARP / neighbour discovery) before it stays on its UDP socket.
constexpr int kNeighborWaitMs = 200;
}  // namespace

namespace {

enum class LinkChoice { kAuto, kUdp, kShm };

/// UROCE_LINK: "udp" sends every connected QP with a global route over UDP,
/// even to a process of the same host (wire testing); "shm" never uses
/// UDP; unset or "auto": UDP exactly when the destination address is not
/// one of this host's (network namespace's) own.
LinkChoice link_choice() {
  static const LinkChoice c = [] {
    const char* e = getenv("UROCE_LINK");
    if (!e || !*e || !strcmp(e, "auto")) return LinkChoice::kAuto;
    if (!strcmp(e, "udp")) return LinkChoice::kUdp;
    if (!strcmp(e, "shm")) return LinkChoice::kShm;
    UROCE_ERR("UROCE_LINK=%s: expected udp, shm or auto; using auto", e);
    return LinkChoice::kAuto;
  }();
  return c;
}

/// The unicast IP address GID `gid` of device `d` stands for (IPv4-mapped
/// or IPv6; a link-local one on `d`'s interface); false for anything else
/// (zero, multicast, unspecified).
bool unicast_addr(const uint8_t* gid, const DeviceInfo& d, link::IpAddr* out) {
  *out = link::IpAddr::of_gid(gid, d.ifindex);
  return !out->empty() && !out->multicast();
}

/// Is `ip` an address of this host? (Binding to it succeeds only then; a
/// multicast group, which any socket may bind, is no host's.)
bool local_address(const link::IpAddr& ip) {
  if (ip.multicast()) return false;
  const link::SockAddr a = link::sockaddr_of(link::UdpAddr{ip, 0});
  int fd = socket(a.sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool ok = bind(fd, a.get(), a.len) == 0;
  close(fd);
  return ok;
}

/// Is `gid` one of device `d`'s own? Then its QPs are on this host, even
/// where no socket can bind it (the loopback device's link-local GID[0]:
/// lo has no link-local address).
bool own_gid(const DeviceInfo& d, const uint8_t* gid) {
  for (uint32_t i = 0; i < d.num_gids; ++i)
    if (memcmp(d.gids[i], gid, 16) == 0) return true;
  return false;
}

uint32_t path_mtu_bytes(const QpModifyArgs& a, uint32_t if_mtu) {
  const uint32_t link = transport::pmtu_bytes(active_mtu_enum(if_mtu));
  const uint32_t asked = a.path_mtu ? transport::pmtu_bytes(a.path_mtu) : link;
  return asked < link ? asked : link;
}

}  // namespace

/// The addresses a UD QP of device `d` receives at: every unicast address
/// among its GIDs, IPv4 first (the first is the QP's own socket's; multicast
/// groups are joined on it).
std::vector<link::IpAddr> ud_addresses(const DeviceInfo& d) {
  std::vector<link::IpAddr> v4, v6;
  for (uint32_t i = 0; i < d.num_gids; ++i) {
    link::IpAddr a;
    if (!unicast_addr(d.gids[i], d, &a)) continue;
    std::vector<link::IpAddr>& to = a.is_v4() ? v4 : v6;
    bool seen = false;
    for (const link::IpAddr& x : to) seen = seen || x == a;
    if (!seen) to.push_back(a);
  }
  v4.insert(v4.end(), v6.begin(), v6.end());
  return v4;
}

bool ud_on_network(const DeviceInfo& d) {
  // Datagrams may come from anywhere: listen on the network unless the
  // device is the loopback one (same-host peers use shared memory).
  const LinkChoice c = link_choice();
  return c != LinkChoice::kShm && !ud_addresses(d).empty() && (c == LinkChoice::kUdp || !d.is_loopback);
}

bool Qp::wants_network() const {
  const LinkChoice c = link_choice();
  if (c == LinkChoice::kShm) return false;
  if (type_ == QpType::kUd) return ud_on_network(ctx_->dev());
  if (type_ != QpType::kRc && type_ != QpType::kUc && type_ != QpType::kXrcSend && type_ != QpType::kXrcRecv)
    return false;
  if (!attr_.av.is_global) return false;  // no GRH: a LID, which only the shared-memory link knows
  const DeviceInfo& d = ctx_->dev();
  link::IpAddr dst, src;
  if (!unicast_addr(attr_.av.dgid, d, &dst)) return false;
  if (attr_.av.sgid_index >= d.num_gids || !unicast_addr(d.gids[attr_.av.sgid_index], d, &src)) return false;
  if (c == LinkChoice::kUdp || !(own_gid(d, attr_.av.dgid) || local_address(dst))) return true;
  // An address of this host: shared memory, if this user's uroced serves the
  // peer's QP. One it does not know belongs to another user's process (or to
  // a process on another daemon): that one is reached as another host would
  // be, over the network link (daemon/peer_check.h).
  auto cc = ControlClient::get();
  if (cc.is_ok() && !cc.value()->knows_qpn(attr_.dest_qpn)) {
    UROCE_INFO("QP %u: peer QP %u is not on this user's uroced: over the network link", qpn_, attr_.dest_qpn);
    return true;
  }
  return false;
}

Status Qp::net_open() {
  const DeviceInfo& d = ctx_->dev();
  NetQp::Config c;
  c.type = type_;
  c.qpn = qpn_;
  std::vector<link::IpAddr> ud_more;
  if (type_ == QpType::kUd) {
    ud_more = ud_addresses(d);
    if (ud_more.empty()) return Status(EINVAL);
    c.local_ip = ud_more.front();
    ud_more.erase(ud_more.begin());
    c.sport = core::udp_sport(0, qpn_, 1);  // one port per UD QP
  } else {
    if (!unicast_addr(d.gids[attr_.av.sgid_index], d, &c.local_ip) ||
        !unicast_addr(attr_.av.dgid, d, &c.remote_ip))
      return Status(EINVAL);
    // One family end to end (an IPv4 socket cannot reach an IPv6 address).
    if (c.local_ip.is_v4() != c.remote_ip.is_v4()) return Status(EINVAL);
    c.sport = c.peer_sport = core::udp_sport(attr_.av.flow_label, qpn_, attr_.dest_qpn);
    if (c.local_ip == c.remote_ip && qpn_ != attr_.dest_qpn) {
      // Both ends on this host (UROCE_LINK=udp): with one port the two
      // directions would be the same 4-tuple and neither connected socket
      // could tell its flow; the QP with the higher number sends from the
      // next port.
      if (qpn_ > attr_.dest_qpn)
        c.sport ^= 1;
      else
        c.peer_sport ^= 1;
    }
  }
  c.pmtu = path_mtu_bytes(attr_, d.if_mtu);
  c.resp.dest_qp = attr_.dest_qpn;
  c.resp.epsn = attr_.rq_psn;
  c.resp.min_rnr_timer = attr_.min_rnr_timer;
  c.resp.max_dest_rd_atomic = attr_.max_dest_rd_atomic ? attr_.max_dest_rd_atomic : 1;
  auto self = PeerMap::get().resolve(qpn_);
  if (!self.is_ok()) return Status(self.err());
  // Counters where uroced and `uroce stat` see them (none if the segment is
  // full: the QP works without).
  if (auto k = ctx_->open_counters(); k.is_ok()) counters_ = c.counters = k.value();
  NetEngine& e = NetEngine::get();
  auto q =
      NetQp::open(c, self.value(), ctx_->host(), e.settings(),
                  [this](const transport::SqWqe& w, WcStatus st, uint32_t n) { net_send_done(w, st, n); });
  if (!q.is_ok()) {
    net_drop();
    return Status(q.err());
  }
  net_ = std::move(q.value());
  if (counters_)
    shm_->counters_off.store(uint64_t(reinterpret_cast<uint8_t*>(counters_) - ctx_->seg().base()),
                             std::memory_order_release);  // pairs with uroced's acquire
  if (Status s = e.add(net_.get()); !s.is_ok()) {
    net_drop();
    return s;
  }
  if (type_ != QpType::kUd)
    if (Status s = net_use_xdp(c.remote_ip); !s.is_ok()) {
      e.remove(net_.get());
      net_drop();
      return s;
    }
  for (const link::IpAddr& a : ud_more)
    if (Status s = net_->add_address(a); !s.is_ok())
      // (The loopback device's link-local GID is no address of lo's.)
      UROCE_INFO("UD QP %u: not receiving at %s (%s)", qpn_, link::to_string(a).c_str(), strerror(s.err()));
  for (uint32_t g : mcast_)
    if (Status s = net_->join(g); !s.is_ok()) {
      e.remove(net_.get());
      net_drop();
      return s;
    }
  return Status::ok();
}

Status Qp::net_use_xdp(const link::IpAddr& remote) {
  const DeviceInfo& d = ctx_->dev();
  NetEngine& e = NetEngine::get();
  const bool required = e.settings().xdp == XdpUse::kRequired;
  link::XdpPort* port = e.xdp_port(d, ctx_->ctl());
  if (!port) return Status(required ? EOPNOTSUPP : 0);
  // The frames' destination: the kernel's neighbour for the peer (a peer
  // it cannot reach through this interface, e.g. one of this host's own
  // addresses, stays on the UDP socket).
  auto mac = link::resolve_neighbor(remote, d.ifindex, kNeighborWaitMs);
  if (!mac.is_ok()) {
    UROCE_INFO("QP %u: UDP socket, not AF_XDP: no neighbour for %s on %s (%s)", qpn_,
               link::to_string(remote).c_str(), d.ifname, strerror(mac.err()));
    return Status(required ? EOPNOTSUPP : 0);
  }
  if (Status st = ctx_->ctl()->xsk_steer(d.ifindex, qpn_, true); !st.is_ok()) {
    UROCE_INFO("QP %u: UDP socket, not AF_XDP: uroced did not steer it (%s)", qpn_, strerror(st.err()));
    return Status(required ? EOPNOTSUPP : 0);
  }
  net_->use_xdp(port, mac.value());
  return Status::ok();
}

namespace {
/// An IPv4-mapped GID of a multicast address (224.0.0.0/4).
bool v4_multicast(const uint8_t* gid, uint32_t* ip) {
  const link::IpAddr a = link::IpAddr::of_gid(gid, 0);
  *ip = a.ip4();
  return a.is_v4() && a.multicast();
}
}  // namespace

Status Qp::attach_mcast(const uint8_t gid[16]) {
  std::lock_guard<AdaptiveLock> g(sq_mu_);
  uint32_t group;
  if (type_ != QpType::kUd || !v4_multicast(gid, &group)) return Status(EINVAL);
  // Groups are joined on the network (the kernel copies each datagram to
  // every member socket of the host); a QP the shared-memory link alone
  // serves (the loopback device, UROCE_LINK unset) has no socket to join.
  if (!wants_network()) return Status(EOPNOTSUPP);
  for (uint32_t x : mcast_)
    if (x == group) return Status::ok();
  if (mcast_.size() >= kLimits.max_mcast_grp) return Status(ENOMEM);
  if (net_)
    if (Status s = net_->join(group); !s.is_ok()) return s;
  mcast_.push_back(group);
  return Status::ok();
}

Status Qp::detach_mcast(const uint8_t gid[16]) {
  std::lock_guard<AdaptiveLock> g(sq_mu_);
  uint32_t group;
  if (type_ != QpType::kUd || !v4_multicast(gid, &group)) return Status(EINVAL);
  for (auto it = mcast_.begin(); it != mcast_.end(); ++it)
    if (*it == group) {
      if (net_) net_->leave(group);
      mcast_.erase(it);
      return Status::ok();
    }
  return Status(EINVAL);
}

bool Qp::mcast_attached() {
  std::lock_guard<AdaptiveLock> g(sq_mu_);
  return !mcast_.empty();
}

void Qp::net_start_requester() {
  // UD sends complete as they go out; an XRC target QP has no send queue.
  if (type_ == QpType::kUd || type_ == QpType::kXrcRecv) return;
  transport::RequesterConfig r;
  r.dest_qp = attr_.dest_qpn;
  r.sq_psn = attr_.sq_psn;
  r.timeout_ns = ack_timeout_ns(attr_.timeout);
  r.retry_cnt = attr_.retry_cnt;
  r.rnr_retry = attr_.rnr_retry;
  r.max_rd_atomic = attr_.max_rd_atomic ? attr_.max_rd_atomic : 1;
  net_->start_requester(r);
}

void Qp::net_close() {
  if (!net_) return;
  NetEngine::get().remove(net_.get());
  net_->flush_acks();
  net_->flush_link();
  // The peer may still retransmit what was executed (its ACK lost): uroced
  // answers for a while (daemon/linger.h). The socket is passed (SCM_RIGHTS)
  // before ours closes, so no datagram of the flow finds no socket.
  const NetQp::Last l = net_->release_for_linger();
  if (l.any && !ctx_->fatal())
    ctx_->ctl()->linger(l.rx_fd, qpn_, l.dest_qpn, l.epsn, l.msn, l.sport, type_ == QpType::kXrcRecv);
  net_drop();
}

void Qp::net_drop() {
  net_.reset();
  if (!counters_) return;
  shm_->counters_off.store(0, std::memory_order_release);
  ctx_->retire_counters(counters_);
  counters_ = nullptr;
}

Status Qp::net_post(const SendWqe& w) {
  iovec loc[kLimits.max_sge];
  size_t nl = 0;
  uint64_t len = 0;
  transport::SqWqe q;
  q.wr_id = w.wr_id;
  q.kind = msg_kind_of(w.opcode);
  q.signaled = sq_sig_all_ || (w.flags & send_flags::kSignaled);
  q.solicited = w.flags & send_flags::kSolicited;
  q.fence = w.flags & send_flags::kFence;
  q.xrc_srqn = w.xrc_srqn;
  // A local operation acts on the MR table at once and completes in order
  // behind what is in flight (RcRequester queues it without packets).
  const WcStatus ls = transport::is_local(q.kind) ? local_op(w) : gather(w, loc, &nl, &len);
  if (ls != WcStatus::kSuccess) {
    // A local error completes at once and the QP goes to ERR (IBA 10.8.3.2).
    q.signaled = true;
    net_send_done(q, ls, 0);
    net_->flush();
    enter_error_st();
    return Status::ok();
  }
  q.len = uint32_t(len);
  if (w.flags & send_flags::kInline) {
    // Inline data belongs to the caller only during the call: keep a copy.
    q.owned.resize(len);
    iov_read({loc, nl}, 0, len, q.owned.data());
  } else {
    q.local.assign(loc, loc + nl);
  }
  q.remote_va = w.remote_addr;
  q.rkey = w.rkey;
  if (q.kind == transport::MsgKind::kSendInv)
    q.inv_rkey = w.imm;
  else
    q.imm = w.imm;
  q.compare_add = w.compare_add;
  q.swap = w.swap;
  NetEngine& e = NetEngine::get();
  e.app_posts();
  net_->post(std::move(q));
  e.kick(net_->next_deadline());
  return Status::ok();
}

bool Qp::ud_over_network(const AddressVector& av) {
  link::IpAddr dst;
  if (!av.is_global) return false;
  // A unicast address or a group (IPv4 only).
  if (!unicast_addr(av.dgid, ctx_->dev(), &dst) && !(dst.is_v4() && dst.multicast())) return false;
  if (link_choice() == LinkChoice::kUdp) return true;
  if (!(dst == ud_dst_cache_ip_)) {
    ud_dst_cache_ip_ = dst;
    ud_dst_cache_remote_ = !(own_gid(ctx_->dev(), av.dgid) || local_address(dst));
  }
  return ud_dst_cache_remote_;
}

Status Qp::net_post_ud(const SendWqe& w) {
  iovec loc[kLimits.max_sge];
  size_t nl = 0;
  uint64_t len = 0;
  if (WcStatus ls = gather(w, loc, &nl, &len); ls != WcStatus::kSuccess) {
    complete_send(w, ls, 0);
    enter_error_st();
    return Status::ok();
  }
  uint8_t buf[kMaxUdPayload];
  if (len > sizeof(buf)) {
    complete_send(w, WcStatus::kLocLenErr, 0);
    enter_error_st();
    return Status::ok();
  }
  iov_read({loc, nl}, 0, len, buf);
  const DeviceInfo& d = ctx_->dev();
  const link::IpAddr dst = link::IpAddr::of_gid(w.av->dgid, d.ifindex);  // ud_over_network checked it
  link::IpAddr src;
  if (w.av->sgid_index < d.num_gids) src = link::IpAddr::of_gid(d.gids[w.av->sgid_index], d.ifindex);
  const uint32_t qkey = ud_send_qkey(w.remote_qkey, attr_.qkey);
  // No address of the destination's family: the datagram is lost, as on a
  // port without such a GID (the send still completes: UD has no ACKs).
  (void)net_->send_ud(dst, src, w.remote_qpn, qkey, w.opcode == WrOpcode::kSendWithImm, w.imm,
                      w.flags & send_flags::kSolicited, {buf, size_t(len)});
  complete_send(w, WcStatus::kSuccess, uint32_t(len));
  return Status::ok();
}

void Qp::net_send_done(const transport::SqWqe& w, WcStatus st, uint32_t byte_len) {
  const bool ok = st == WcStatus::kSuccess;
  send_cqe(w.wr_id, wc_opcode_of(w.kind), st, ok ? byte_len : 0, w.signaled || !ok, &net_unsignaled_);
}

}  // namespace uroce::core
