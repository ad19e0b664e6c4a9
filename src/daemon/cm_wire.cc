// CmService's side on the wire: an id whose other end is on another host
// talks to that host's CM (a kernel's, or another uroced's) with the IBTA
// CM's messages (IBTA Vol. 1, ch. 12; as MADs to QP1: daemon/gsi.h), the
// RDMA CM's IP header leading a REQ's private data (wire/cm_mad.h), and the
// service ID of the port space and port.
//
// Connecting: REQ -> (MRA) -> REP -> RTU; the REQ is sent again each
// response timeout until the REP comes (UNREACHABLE -ETIMEDOUT, and a REJ
// with reason 1, when the retries run out); a duplicate REP is answered
// with the RTU again. Accepting: a REQ reaches the listener as
// CONNECT_REQUEST (a duplicate is answered with an MRA until the program
// answers, then with its REP); the REP is sent again until the RTU comes.
// DREQ is answered by DREP whether or not a connection is known (a late
// duplicate finds none). SIDR: SIDR REQ -> SIDR REP (status 0 with the QP,
// 1 no such service, 2 rejected). What does not fit is counted and dropped.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "daemon/cm_service.h"

namespace uroce::daemon {
namespace {

using cmproto::Msg;
namespace cm = wire::cm;
using MadBuf = std::array<uint8_t, cm::kMadSize>;

constexpr uint8_t kPacketLifeTime = 16;  // what the kernel's RoCE paths say (4.096 us * 2^16 = 0.27 s)
constexpr uint8_t kMraServiceTimeout =
    24;  // an MRA asks this much more time (68.7 s, as the kernel's RDMA CM)
constexpr uint8_t kTargetAckDelay = 15;

constexpr uint8_t kSidrOk = 0;  // SIDR REP status (IBTA 12.11.2); the others in cm_protocol.h

uint64_t timeout_ns(uint8_t exp) { return 4096ull << std::min<uint8_t>(exp, 31); }

/// How long to wait for an answer from a side that says it answers within
/// `peer_timeout`: that, plus the way there and back.
uint64_t wait_ns(uint8_t peer_timeout) { return timeout_ns(peer_timeout) + 2 * timeout_ns(kPacketLifeTime); }

std::array<uint8_t, 16> key(const link::IpAddr& a) {
  std::array<uint8_t, 16> k;
  memcpy(k.data(), a.b, 16);
  return k;
}

/// A sockaddr_in or sockaddr_in6 (as the protocol carries them) of an
/// address and port.
void to_sockaddr(const link::IpAddr& ip, uint16_t port, uint8_t out[28]) {
  memset(out, 0, 28);
  if (ip.is_v4()) {
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
    in.sin_addr.s_addr = ip.raw4();
    memcpy(out, &in, sizeof(in));
  } else {
    sockaddr_in6 in{};
    in.sin6_family = AF_INET6;
    in.sin6_port = htons(port);
    memcpy(&in.sin6_addr, ip.b, 16);
    in.sin6_scope_id = ip.scope;
    memcpy(out, &in, sizeof(in));
  }
}

/// The address and port of a sockaddr the protocol carries.
link::IpAddr from_sockaddr(const uint8_t a[28], uint16_t* port) {
  sockaddr s{};
  memcpy(&s, a, sizeof(s));
  if (s.sa_family == AF_INET) {
    sockaddr_in in;
    memcpy(&in, a, sizeof(in));
    *port = ntohs(in.sin_port);
    return link::IpAddr::v4(in.sin_addr.s_addr);
  }
  sockaddr_in6 in;
  memcpy(&in, a, sizeof(in));
  *port = ntohs(in.sin6_port);
  link::IpAddr ip;
  memcpy(ip.b, &in.sin6_addr, 16);
  ip.scope = in.sin6_scope_id;
  return ip;
}

/// The RDMA CM's header for a request from `src` to `dst`.
void cma_header(const uint8_t src[28], const uint8_t dst[28], uint8_t* out) {
  cm::CmaHeader h;
  uint16_t sport = 0, dport = 0;
  const link::IpAddr s = from_sockaddr(src, &sport), d = from_sockaddr(dst, &dport);
  h.ip_version = s.is_v4() ? 4 : 6;
  h.port = sport;
  if (s.is_v4()) {
    // IPv4 in the last four bytes, the twelve before them zero (not the
    // ::ffff: of a GID), as the kernel's cma_hdr has it.
    memcpy(h.src + 12, s.b + 12, 4);
    memcpy(h.dst + 12, d.b + 12, 4);
  } else {
    memcpy(h.src, s.b, 16);
    memcpy(h.dst, d.b, 16);
  }
  cm::encode(h, std::span<uint8_t, cm::CmaHeader::kSize>(out, cm::CmaHeader::kSize));
}

uint16_t port_of(const uint8_t a[28]) {
  uint16_t p = 0;
  (void)from_sockaddr(a, &p);
  return p;
}

/// The addresses of an RDMA CM header (IPv4 as a GID holds it).
void cma_addresses(const cm::CmaHeader& h, link::IpAddr* src, link::IpAddr* dst) {
  if (h.ip_version == 4) {
    uint32_t a, b;
    memcpy(&a, h.src + 12, 4);
    memcpy(&b, h.dst + 12, 4);
    *src = link::IpAddr::v4(a);
    *dst = link::IpAddr::v4(b);
  } else {
    memcpy(src->b, h.src, 16);
    memcpy(dst->b, h.dst, 16);
  }
}

bool datagram(uint32_t ps) { return ps == cmproto::kPsUdp || ps == cmproto::kPsIpoib; }

cm::MadHeader header(uint64_t tid, cm::Attr attr) {
  cm::MadHeader h;
  h.tid = tid;
  h.attr_id = uint16_t(attr);
  return h;
}

}  // namespace

uint32_t CmService::new_comm_id() {
  for (;;) {
    uint32_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != sizeof(r)) r = uint32_t(next_handle_ * 2654435761u);
    if (r != 0 && by_comm_.count(r) == 0) return r;
  }
}

CmService::Id* CmService::by_comm(uint32_t comm, const link::IpAddr& from, uint64_t* handle) {
  auto it = by_comm_.find(comm);
  if (it == by_comm_.end()) return nullptr;
  auto id = ids_.find(it->second);
  if (id == ids_.end() || !id->second.remote || !(id->second.remote->peer == from)) return nullptr;
  *handle = it->second;
  return &id->second;
}

void CmService::wire_send(uint64_t handle, const MadBuf& mad, uint64_t now_ns, bool timer, uint8_t timeout) {
  Remote& r = *ids_.at(handle).remote;
  r.last = mad;
  r.has_last = true;
  (void)hooks_.send_mad(r.local, r.peer, mad);
  r.deadline_ns = 0;
  if (timer) {
    r.tries_left = r.max_retries;
    r.deadline_ns = now_ns + wait_ns(timeout);
    timers_.emplace(r.deadline_ns, handle);
  }
}

void CmService::wire_connect(uint64_t handle, const Msg& m, uint64_t now_ns) {
  Id& id = ids_.at(handle);
  auto r = std::make_unique<Remote>();
  uint16_t sport = 0, dport = 0;
  r->local = from_sockaddr(m.src, &sport);
  r->peer = from_sockaddr(m.dst, &dport);
  r->local_comm_id = new_comm_id();
  uint32_t hi = 0;
  if (getrandom(&hi, sizeof(hi), 0) != sizeof(hi)) hi = 0;
  r->tid = uint64_t(hi) << 32 | r->local_comm_id;
  r->mtu = m.conn.mtu;
  r->no_listener_until = now_ns + kRemoteListenerWaitNs;
  r->peer_timeout = timing_.response_timeout;
  r->max_retries = timing_.max_retries;
  const uint64_t guid = hooks_.node_guid(r->local);
  if (guid == 0) {
    // No QP1 on the source address (a device without one: no route out).
    id.state = State::kGone;
    event(handle, cmproto::kEvUnreachable, -ENETUNREACH);
    return;
  }
  by_comm_[r->local_comm_id] = handle;
  id.remote = std::move(r);
  const Remote& rr = *id.remote;
  const uint64_t sid = cm::service_id(uint16_t(id.ps), dport);
  MadBuf mad{};
  if (datagram(id.ps)) {
    cm::SidrReq q;
    q.request_id = rr.local_comm_id;
    q.service_id = sid;
    cma_header(m.src, m.dst, q.private_data);
    memcpy(q.private_data + cm::CmaHeader::kSize, m.conn.private_data,
           std::min<size_t>(m.conn.private_data_len, cm::kSidrReqPrivate - cm::CmaHeader::kSize));
    cm::encode(header(rr.tid, cm::Attr::kSidrReq), q, mad);
  } else {
    cm::Req q;
    q.local_comm_id = rr.local_comm_id;
    q.service_id = sid;
    q.local_ca_guid = guid;
    q.local_qpn = m.conn.qpn & 0xffffff;
    q.responder_resources = m.conn.responder_resources;
    q.initiator_depth = m.conn.initiator_depth;
    q.remote_cm_response_timeout = timing_.response_timeout;
    q.transport_type = 0;  // RC
    q.end_to_end_flow_control = m.conn.flow_control;
    q.starting_psn = m.conn.psn & 0xffffff;
    q.local_cm_response_timeout = timing_.response_timeout;
    q.retry_count = m.conn.retry_count & 7;
    q.path_mtu = m.conn.mtu;
    q.rnr_retry_count = m.conn.rnr_retry_count & 7;
    q.max_cm_retries = timing_.max_retries & 15;
    q.srq = m.conn.srq;
    memcpy(q.primary_local_gid, m.sgid, 16);
    memcpy(q.primary_remote_gid, m.dgid, 16);
    q.primary_hop_limit = 64;
    q.primary_packet_rate = 0;
    q.primary_local_ack_timeout = kPacketLifeTime + 1;
    cma_header(m.src, m.dst, q.private_data);
    memcpy(q.private_data + cm::CmaHeader::kSize, m.conn.private_data,
           std::min<size_t>(m.conn.private_data_len, cm::kReqPrivate - cm::CmaHeader::kSize));
    cm::encode(header(rr.tid, cm::Attr::kReq), q, mad);
  }
  wire_send(handle, mad, now_ns, true, rr.peer_timeout);
}

CmService::Route CmService::route_request(const Incoming& in, uint64_t service_id, const cm::CmaHeader& ch,
                                          bool datagram_req, uint64_t now_ns, uint64_t wait_until_ns,
                                          Msg* req) {
  const uint32_t ps = uint32_t(service_id >> 16);
  link::IpAddr src, dst;
  cma_addresses(ch, &src, &dst);
  uint8_t src_sa[28], dst_sa[28];
  to_sockaddr(dst, uint16_t(service_id), dst_sa);
  to_sockaddr(src, ch.port, src_sa);
  const bool ours = (service_id >> 32) == 0 && datagram(ps) == datagram_req;
  const uint64_t lh = ours ? find_listener(ps, dst_sa) : 0;
  if (lh == 0 && now_ns < wait_until_ns) {
    // As a request between processes of this host waits (connect()).
    if (!wire_waiting(in.from, in.comm)) {  // else a duplicate
      wire_pending_.push_back(WirePending{{}, in.from, in.to, in.comm, wait_until_ns});
      std::copy(in.mad.begin(), in.mad.begin() + cm::kMadSize, wire_pending_.back().mad.begin());
    }
    return Route::kWaits;
  }
  if (lh == 0) {
    UROCE_INFO("uroced cm: request from %s for service %#llx at %s: no listener",
               link::to_string(in.from).c_str(), (unsigned long long)service_id,
               link::to_string(dst).c_str());
    return Route::kNoListener;
  }
  if (conns_.at(ids_.at(lh).conn).ids.size() >= kMaxIdsPerConn) return Route::kFull;
  memcpy(req->src, dst_sa, 28);  // as the listener's side sees it
  memcpy(req->dst, src_sa, 28);
  memcpy(req->sgid, dst.b, 16);
  memcpy(req->dgid, src.b, 16);
  req->listen_handle = lh;
  req->ps = ps;
  return Route::kListener;
}

uint64_t CmService::add_requested(const Incoming& in, const Msg& req, std::unique_ptr<Remote> remote) {
  remote->local = in.to;
  remote->peer = in.from;
  remote->local_comm_id = new_comm_id();
  remote->remote_comm_id = in.comm;
  remote->tid = in.tid;
  const Id& l = ids_.at(req.listen_handle);
  const uint64_t h = next_handle_++;
  Id s(l.conn, l.ps, State::kRequested);
  memcpy(s.addr, req.src, sizeof(s.addr));
  s.remote = std::move(remote);
  by_comm_[s.remote->local_comm_id] = h;
  by_request_[{key(s.remote->peer), s.remote->remote_comm_id}] = h;
  conns_.at(l.conn).ids.insert(h);
  ids_.emplace(h, std::move(s));
  return h;
}

bool CmService::wire_waiting(const link::IpAddr& from, uint32_t comm) const {
  for (const WirePending& p : wire_pending_)
    if (p.comm == comm && p.from == from) return true;
  return false;
}

void CmService::retry_wire_pending(uint64_t now_ns, bool expired) {
  std::list<WirePending> all;
  all.swap(wire_pending_);
  for (const WirePending& p : all) {
    if (expired && p.deadline_ns > now_ns) {
      wire_pending_.push_back(p);
      continue;
    }
    cm::MadHeader h;
    (void)cm::decode_header(p.mad, &h);  // it decoded when it came
    const uint64_t until = expired ? 0 : p.deadline_ns;
    if (cm::Attr(h.attr_id) == cm::Attr::kReq)
      on_req(h, p.mad, p.from, p.to, now_ns, until);
    else
      on_sidr_req(h, p.mad, p.from, p.to, now_ns, until);
  }
}

void CmService::on_req(const cm::MadHeader& h, std::span<const uint8_t> mad, const link::IpAddr& from,
                       const link::IpAddr& to, uint64_t now_ns, uint64_t wait_until_ns) {
  cm::Req q;
  cm::CmaHeader ch;
  if (!cm::decode(mad, &q) ||
      !cm::decode(std::span<const uint8_t>(q.private_data, cm::CmaHeader::kSize), &ch)) {
    ++mads_dropped_;
    return;
  }
  MadBuf out{};
  if (auto d = by_request_.find({key(from), q.local_comm_id}); d != by_request_.end()) {
    // A duplicate: the REQ crossed our answer, or the program has not answered yet.
    Id& id = ids_.at(d->second);
    if (id.state == State::kRequested) {
      cm::Mra a;
      a.local_comm_id = id.remote->local_comm_id;
      a.remote_comm_id = q.local_comm_id;
      a.message_mraed = 0;
      a.service_timeout = kMraServiceTimeout;
      cm::encode(header(h.tid, cm::Attr::kMra), a, out);
      (void)hooks_.send_mad(to, from, out);
    } else if (id.remote->has_last) {
      (void)hooks_.send_mad(to, from, id.remote->last);
    }
    return;
  }
  auto reject = [&](uint16_t reason) {
    cm::Rej j;
    j.remote_comm_id = q.local_comm_id;
    j.message_rejected = 0;
    j.reason = reason;
    cm::encode(header(h.tid, cm::Attr::kRej), j, out);
    (void)hooks_.send_mad(to, from, out);
  };
  Incoming in{mad, from, to, h.tid, q.local_comm_id};
  Msg req{};
  switch (route_request(in, q.service_id, ch, false, now_ns, wait_until_ns, &req)) {
    case Route::kWaits:
      return;
    case Route::kNoListener:
      reject(cmproto::kRejInvalidServiceId);
      return;
    case Route::kFull:
      reject(cmproto::kRejConsumer);
      return;
    case Route::kListener:
      break;
  }
  auto r = std::make_unique<Remote>();
  r->remote_qpn = q.local_qpn;
  r->mtu = q.path_mtu;
  r->peer_timeout = q.local_cm_response_timeout;
  r->max_retries = q.max_cm_retries;
  const uint64_t sh = add_requested(in, req, std::move(r));
  memcpy(req.sgid, q.primary_remote_gid, 16);  // as the listener's side sees it
  memcpy(req.dgid, q.primary_local_gid, 16);
  req.flow_label = q.primary_flow_label;
  cmproto::Conn& c = req.conn;
  c.qpn = q.local_qpn;
  c.psn = q.starting_psn;
  c.responder_resources = q.responder_resources;
  c.initiator_depth = q.initiator_depth;
  c.retry_count = q.retry_count;
  c.rnr_retry_count = q.rnr_retry_count;
  c.flow_control = q.end_to_end_flow_control;
  c.srq = q.srq;
  c.mtu = q.path_mtu;
  c.private_data_len = cm::kReqPrivate - cm::CmaHeader::kSize;
  memcpy(c.private_data, q.private_data + cm::CmaHeader::kSize, c.private_data_len);
  event(sh, cmproto::kEvConnectRequest, 0, &req);
}

void CmService::on_sidr_req(const cm::MadHeader& h, std::span<const uint8_t> mad, const link::IpAddr& from,
                            const link::IpAddr& to, uint64_t now_ns, uint64_t wait_until_ns) {
  cm::SidrReq q;
  cm::CmaHeader ch;
  if (!cm::decode(mad, &q) ||
      !cm::decode(std::span<const uint8_t>(q.private_data, cm::CmaHeader::kSize), &ch)) {
    ++mads_dropped_;
    return;
  }
  if (by_request_.count({key(from), q.request_id})) return;  // a duplicate: the program answers once
  Incoming in{mad, from, to, h.tid, q.request_id};
  Msg req{};
  const Route route = route_request(in, q.service_id, ch, true, now_ns, wait_until_ns, &req);
  if (route == Route::kWaits) return;
  if (route != Route::kListener) {
    cm::SidrRep a;
    a.request_id = q.request_id;
    a.status = route == Route::kFull ? cmproto::kSidrRejected : cmproto::kSidrNoService;
    a.service_id = q.service_id;
    MadBuf out{};
    cm::encode(header(h.tid, cm::Attr::kSidrRep), a, out);
    (void)hooks_.send_mad(to, from, out);
    return;
  }
  const uint64_t sh = add_requested(in, req, std::make_unique<Remote>());
  req.conn.private_data_len = cm::kSidrReqPrivate - cm::CmaHeader::kSize;
  memcpy(req.conn.private_data, q.private_data + cm::CmaHeader::kSize, req.conn.private_data_len);
  event(sh, cmproto::kEvConnectRequest, 0, &req);
}

void CmService::wire_accept(uint64_t handle, const Msg& m, uint64_t now_ns) {
  Id& id = ids_.at(handle);
  Remote& r = *id.remote;
  MadBuf mad{};
  if (datagram(id.ps)) {
    cm::SidrRep a;
    a.request_id = r.remote_comm_id;
    a.status = kSidrOk;
    a.qpn = m.conn.qpn & 0xffffff;
    a.service_id = cm::service_id(uint16_t(id.ps), port_of(id.addr));
    a.qkey = cmproto::kUdpQkey;
    memcpy(a.private_data, m.conn.private_data,
           std::min<size_t>(m.conn.private_data_len, cm::kSidrRepPrivate));
    cm::encode(header(r.tid, cm::Attr::kSidrRep), a, mad);
    wire_send(handle, mad, now_ns, false, 0);
    id.state = State::kGone;  // SIDR: the answer is all there is
    return;
  }
  cm::Rep a;
  a.local_comm_id = r.local_comm_id;
  a.remote_comm_id = r.remote_comm_id;
  a.local_qpn = m.conn.qpn & 0xffffff;
  a.starting_psn = m.conn.psn & 0xffffff;
  a.responder_resources = m.conn.responder_resources;
  a.initiator_depth = m.conn.initiator_depth;
  a.target_ack_delay = kTargetAckDelay;
  a.end_to_end_flow_control = m.conn.flow_control;
  a.rnr_retry_count = m.conn.rnr_retry_count & 7;
  a.srq = m.conn.srq;
  a.local_ca_guid = hooks_.node_guid(r.local);
  memcpy(a.private_data, m.conn.private_data, std::min<size_t>(m.conn.private_data_len, cm::kRepPrivate));
  cm::encode(header(r.tid, cm::Attr::kRep), a, mad);
  id.state = State::kAccepted;
  wire_send(handle, mad, now_ns, true, r.peer_timeout);
}

void CmService::wire_reject(uint64_t handle, const Msg& m) {
  Id& id = ids_.at(handle);
  Remote& r = *id.remote;
  MadBuf mad{};
  if (datagram(id.ps)) {
    cm::SidrRep a;
    a.request_id = r.remote_comm_id;
    a.status = cmproto::kSidrRejected;
    a.service_id = cm::service_id(uint16_t(id.ps), port_of(id.addr));
    memcpy(a.private_data, m.conn.private_data,
           std::min<size_t>(m.conn.private_data_len, cm::kSidrRepPrivate));
    cm::encode(header(r.tid, cm::Attr::kSidrRep), a, mad);
  } else {
    cm::Rej j;
    j.local_comm_id = r.local_comm_id;
    j.remote_comm_id = r.remote_comm_id;
    j.message_rejected = 0;
    j.reason = cmproto::kRejConsumer;
    memcpy(j.private_data, m.conn.private_data, std::min<size_t>(m.conn.private_data_len, cm::kRejPrivate));
    cm::encode(header(r.tid, cm::Attr::kRej), j, mad);
  }
  wire_send(handle, mad, 0, false, 0);
  id.state = State::kGone;
}

void CmService::wire_establish(uint64_t handle) {
  Id& id = ids_.at(handle);
  Remote& r = *id.remote;
  cm::Rtu u;
  u.local_comm_id = r.local_comm_id;
  u.remote_comm_id = r.remote_comm_id;
  MadBuf mad{};
  cm::encode(header(r.tid, cm::Attr::kRtu), u, mad);
  wire_send(handle, mad, 0, false, 0);  // kept: a duplicate REP gets it again
  id.state = State::kConnected;
}

void CmService::send_rej(uint64_t handle, uint8_t message_rejected, uint16_t reason) {
  const Remote& r = *ids_.at(handle).remote;
  cm::Rej j;
  j.local_comm_id = r.local_comm_id;
  j.remote_comm_id = r.remote_comm_id;
  j.message_rejected = message_rejected;
  j.reason = reason;
  MadBuf mad{};
  cm::encode(header(r.tid, cm::Attr::kRej), j, mad);
  wire_send(handle, mad, 0, false, 0);  // kept: a duplicate gets it again
}

void CmService::wire_end(uint64_t handle, uint64_t now_ns, bool id_stays) {
  Id& id = ids_.at(handle);
  Remote& r = *id.remote;
  MadBuf mad{};
  if (id.state == State::kConnected && !datagram(id.ps)) {
    cm::Dreq d;
    d.local_comm_id = r.local_comm_id;
    d.remote_comm_id = r.remote_comm_id;
    d.remote_qpn = r.remote_qpn;
    cm::encode(header(r.tid, cm::Attr::kDreq), d, mad);
    // Sent again until the DREP comes while the id lives (no DREP: the
    // peer's CM is gone too; nothing to report).
    wire_send(handle, mad, now_ns, id_stays, r.peer_timeout);
  } else if (!datagram(id.ps) && id.state != State::kGone) {
    // As the kernel's CM when an id goes before it is connected
    // (cm_destroy_id): a REQ not answered yet is refused (the REJ names
    // the REQ); a connect whose REQ got no answer yet ends as timed out;
    // after a REP, either way, refused by the consumer.
    if (id.state == State::kRequested)
      send_rej(handle, cm::kRejectedReq, cmproto::kRejConsumer);
    else if (id.state == State::kConnecting && !r.answered)
      send_rej(handle, cm::kRejectedOther, cmproto::kRejTimeout);
    else
      send_rej(handle, cm::kRejectedOther, cmproto::kRejConsumer);
  }
  id.state = State::kGone;
  if (!id_stays) {
    by_comm_.erase(r.local_comm_id);
    by_request_.erase({key(r.peer), r.remote_comm_id});
  }
}

uint64_t CmService::give_up_ns() const {
  return (uint64_t(timing_.max_retries) + 1) * wait_ns(timing_.response_timeout);
}

void CmService::wire_expire(uint64_t now_ns) {
  while (!timers_.empty() && timers_.begin()->first <= now_ns) {
    const auto [deadline, handle] = *timers_.begin();
    timers_.erase(timers_.begin());
    auto it = ids_.find(handle);
    if (it == ids_.end() || !it->second.remote || it->second.remote->deadline_ns != deadline) continue;
    Id& id = it->second;
    Remote& r = *id.remote;
    if (r.tries_left > 0) {
      --r.tries_left;
      (void)hooks_.send_mad(r.local, r.peer, r.last);
      r.deadline_ns = now_ns + wait_ns(r.peer_timeout);
      timers_.emplace(r.deadline_ns, handle);
      continue;
    }
    r.deadline_ns = 0;
    if (id.state == State::kConnecting || id.state == State::kAccepted) {
      // No REP (or no RTU) in all that time: a REJ says so to the other
      // side, and the program gets UNREACHABLE, as from the kernel's CM.
      if (!datagram(id.ps)) send_rej(handle, cm::kRejectedOther, cmproto::kRejTimeout);
      id.state = State::kGone;
      event(handle, cmproto::kEvUnreachable, -ETIMEDOUT);
    }
  }
}

void CmService::on_mad(std::span<const uint8_t> mad, const link::IpAddr& from, const link::IpAddr& to,
                       uint64_t now_ns) {
  cm::MadHeader h;
  if (!cm::decode_header(mad, &h)) {
    ++mads_dropped_;
    return;
  }
  uint64_t handle = 0;
  Id* id = nullptr;
  MadBuf out{};
  switch (cm::Attr(h.attr_id)) {
    case cm::Attr::kReq:
      on_req(h, mad, from, to, now_ns, now_ns + kNoListenerWaitNs);
      return;
    case cm::Attr::kSidrReq:
      on_sidr_req(h, mad, from, to, now_ns, now_ns + kNoListenerWaitNs);
      return;
    case cm::Attr::kRep: {
      cm::Rep a;
      if (!cm::decode(mad, &a) || !(id = by_comm(a.remote_comm_id, from, &handle))) break;
      Remote& r = *id->remote;
      if (id->state == State::kConnected && r.has_last) {
        (void)hooks_.send_mad(r.local, r.peer, r.last);  // our RTU was lost
        return;
      }
      if (id->state != State::kConnecting || r.answered) return;  // the program has it already
      r.answered = true;
      r.remote_comm_id = a.local_comm_id;
      r.remote_qpn = a.local_qpn;
      r.deadline_ns = 0;
      Msg e{};
      cmproto::Conn& c = e.conn;
      c.qpn = a.local_qpn;
      c.psn = a.starting_psn;
      c.responder_resources = a.responder_resources;
      c.initiator_depth = a.initiator_depth;
      c.rnr_retry_count = a.rnr_retry_count;
      c.flow_control = a.end_to_end_flow_control;
      c.srq = a.srq;
      c.mtu = r.mtu;
      c.private_data_len = cm::kRepPrivate;
      memcpy(c.private_data, a.private_data, cm::kRepPrivate);
      event(handle, cmproto::kEvConnectResponse, 0, &e);
      return;
    }
    case cm::Attr::kRtu: {
      cm::Rtu a;
      if (!cm::decode(mad, &a) || !(id = by_comm(a.remote_comm_id, from, &handle))) break;
      if (id->state != State::kAccepted) return;
      id->state = State::kConnected;
      id->remote->deadline_ns = 0;
      event(handle, cmproto::kEvEstablished, 0);
      return;
    }
    case cm::Attr::kRej: {
      cm::Rej a;
      if (!cm::decode(mad, &a) || !(id = by_comm(a.remote_comm_id, from, &handle))) break;
      if (id->state != State::kConnecting && id->state != State::kAccepted) return;
      Remote& r = *id->remote;
      if (id->state == State::kConnecting && !r.answered && a.reason == cmproto::kRejInvalidServiceId &&
          now_ns < r.no_listener_until && r.has_last) {
        // Nothing listens yet. Programs connect right after their server
        // said it is ready on a channel of their own, before it listens
        // (perftest's -R does so for its second connection); the kernel's
        // CM on a slow host refuses them. As a request that reaches
        // uroced before its listener waits (kNoListenerWaitNs), the REQ
        // goes again for a while before the program is told.
        r.deadline_ns = now_ns + kNoListenerRetryNs;
        r.tries_left = std::max<uint32_t>(r.tries_left, 1);
        timers_.emplace(r.deadline_ns, handle);
        return;
      }
      id->state = State::kGone;
      id->remote->deadline_ns = 0;
      Msg e{};
      e.conn.private_data_len = cm::kRejPrivate;
      memcpy(e.conn.private_data, a.private_data, cm::kRejPrivate);
      event(handle, cmproto::kEvRejected, a.reason, &e);
      return;
    }
    case cm::Attr::kMra: {
      cm::Mra a;
      if (!cm::decode(mad, &a) || !(id = by_comm(a.remote_comm_id, from, &handle))) break;
      Remote& r = *id->remote;
      if (r.deadline_ns == 0 || (id->state != State::kConnecting && id->state != State::kAccepted)) return;
      // The other side needs longer: wait that long before the next try.
      r.deadline_ns = now_ns + timeout_ns(a.service_timeout) + 2 * timeout_ns(kPacketLifeTime);
      timers_.emplace(r.deadline_ns, handle);
      return;
    }
    case cm::Attr::kDreq: {
      cm::Dreq a;
      if (!cm::decode(mad, &a)) break;
      // Answered in any case: a duplicate after the connection went finds none.
      cm::Drep d;
      d.local_comm_id = a.remote_comm_id;
      d.remote_comm_id = a.local_comm_id;
      cm::encode(header(h.tid, cm::Attr::kDrep), d, out);
      (void)hooks_.send_mad(to, from, out);
      if (!(id = by_comm(a.remote_comm_id, from, &handle))) return;
      const bool connected = id->state == State::kConnected || id->state == State::kAccepted;
      if (!connected) return;
      id->state = State::kGone;
      id->remote->deadline_ns = 0;
      event(handle, cmproto::kEvDisconnected, 0);
      return;
    }
    case cm::Attr::kDrep: {
      cm::Drep a;
      if (!cm::decode(mad, &a) || !(id = by_comm(a.remote_comm_id, from, &handle))) break;
      id->remote->deadline_ns = 0;
      return;
    }
    case cm::Attr::kSidrRep: {
      cm::SidrRep a;
      if (!cm::decode(mad, &a) || !(id = by_comm(a.request_id, from, &handle))) break;
      if (id->state != State::kConnecting) return;
      id->state = State::kGone;
      id->remote->deadline_ns = 0;
      Msg e{};
      e.conn.qpn = a.qpn;
      e.conn.private_data_len = cm::kSidrRepPrivate;
      memcpy(e.conn.private_data, a.private_data, cm::kSidrRepPrivate);
      if (a.status == kSidrOk)
        event(handle, cmproto::kEvConnectResponse, 0, &e);
      else
        event(handle, cmproto::kEvUnreachable, a.status, &e);  // the kernel reports the status so
      return;
    }
  }
  ++mads_dropped_;
}

}  // namespace uroce::daemon
