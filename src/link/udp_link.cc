#include "link/udp_link.h"

#include <arpa/inet.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "wire/icrc.h"
#include "wire/ip_udp.h"

namespace uroce::link {

namespace {

/// After a send the kernel refused: true (after a pause) if it is worth
/// trying again. A full socket buffer or a signal passes; past a few tries
/// the packet counts as lost, which RC retransmits — retrying first keeps a
/// burst from turning into losses needlessly.
bool retry_send(int* tries) {
  if ((errno != EAGAIN && errno != ENOBUFS && errno != EINTR) || ++*tries >= 64) return false;
  cpu_relax();
  return true;
}

constexpr size_t kMaxDatagram = 65536;
constexpr size_t kMaxUdpPayload = 65535 - 20 - 8;  // one IPv4 datagram, or one GSO send
constexpr int kSocketBuffer = 8 << 20;
// sendmmsg entries per call; a longer queue is sent in several calls.
constexpr int kSendBatch = 64;
// A queue this long is sent before uncork(): bounded memory for a long burst.
constexpr size_t kQueueBytes = 1 << 20;
#ifndef SOL_UDP
constexpr int SOL_UDP = IPPROTO_UDP;
#endif

// The datapath's socket calls, made without glibc's wrappers: those are
// cancellation points, and in a process with threads (the engine's) each
// call switches asynchronous cancellation on and off around the system call
// — ~6 % of the samples of an application spinning on an empty socket here.
// Every datapath call is non-blocking, so none needs to be a cancellation point.
ssize_t sys_recvmsg(int fd, msghdr* m, int flags) { return syscall(SYS_recvmsg, fd, m, flags); }
int sys_recvmmsg(int fd, mmsghdr* m, unsigned n, int flags) {
  return int(syscall(SYS_recvmmsg, fd, m, n, flags, nullptr));
}
ssize_t sys_sendmsg(int fd, const msghdr* m, int flags) { return syscall(SYS_sendmsg, fd, m, flags); }
int sys_sendmmsg(int fd, mmsghdr* m, unsigned n, int flags) {
  return int(syscall(SYS_sendmmsg, fd, m, n, flags));
}
ssize_t sys_sendto(int fd, const void* d, size_t len, const sockaddr* to, socklen_t tolen) {
  return syscall(SYS_sendto, fd, d, len, 0, to, tolen);
}

uint64_t wall_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace

size_t ip_udp_headers(const UdpAddr& src, const UdpAddr& dst, size_t len, uint8_t h[kMaxIpUdpHeaders],
                      uint16_t id, const uint8_t* payload, uint8_t tos) {
  if (src.ip.is_v4()) {
    wire::Ipv4UdpFields f;
    f.tos = tos;
    f.src = src.ip.ip4();
    f.dst = dst.ip.ip4();
    f.sport = src.port;
    f.dport = dst.port;
    f.id = id;
    f.header_checksum = payload != nullptr;
    wire::build_ipv4_udp(f, len, nullptr, h, h + wire::kIpv4HeaderBytes);
    return wire::kIpv4HeaderBytes + wire::kUdpHeaderBytes;
  }
  wire::Ipv6UdpFields f;
  memcpy(f.src, src.ip.b, 16);
  memcpy(f.dst, dst.ip.b, 16);
  f.sport = src.port;
  f.dport = dst.port;
  f.traffic_class = tos;
  wire::build_ipv6_udp(f, len, payload, h, h + wire::kIpv6HeaderBytes);
  return wire::kIpv6HeaderBytes + wire::kUdpHeaderBytes;
}

uint32_t icrc_v6(const UdpAddr& src, const UdpAddr& dst, std::span<const uint8_t> ib) {
  uint8_t h[kMaxIpUdpHeaders];
  ip_udp_headers(src, dst, ib.size() + wire::kIcrcBytes, h);
  return wire::icrc({h, wire::kIpv6HeaderBytes}, {h + wire::kIpv6HeaderBytes, wire::kUdpHeaderBytes}, ib);
}

SockAddr sockaddr_of(const UdpAddr& a) {
  SockAddr s;
  if (a.ip.is_v4()) {
    s.in = sockaddr_in{};
    s.in.sin_family = AF_INET;
    s.in.sin_addr.s_addr = a.ip.ip4();
    s.in.sin_port = htons(a.port);
    s.len = sizeof(s.in);
  } else {
    s.in6 = sockaddr_in6{};
    s.in6.sin6_family = AF_INET6;
    memcpy(&s.in6.sin6_addr, a.ip.b, 16);
    s.in6.sin6_port = htons(a.port);
    s.in6.sin6_scope_id = a.ip.scope;
    s.len = sizeof(s.in6);
  }
  return s;
}

UdpAddr udp_addr_of(const sockaddr* s) {
  UdpAddr a;
  if (s->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(s);
    a.ip = IpAddr::v4(in->sin_addr.s_addr);
    a.port = ntohs(in->sin_port);
  } else if (s->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(s);
    memcpy(a.ip.b, &in6->sin6_addr, 16);
    if (a.ip.link_local()) a.ip.scope = in6->sin6_scope_id;
    a.port = ntohs(in6->sin6_port);
  }
  return a;
}

Result<std::unique_ptr<UdpEndpoint>> UdpEndpoint::open(const Options& o) {
  // The ICRC covers the source address: it must be known, so no wildcard bind.
  if (o.bind.ip.empty()) return Status(EINVAL);
  std::unique_ptr<UdpEndpoint> e(new UdpEndpoint());
  e->v6_ = !o.bind.ip.is_v4();
  e->fd_ = socket(e->v6_ ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (e->fd_ < 0) return Status(errno);
  const int one = 1, buf = kSocketBuffer;
  // Don't fragment (RoCE packets fit the path MTU by construction), which is
  // also what makes Linux send IP identification 0 on an unconnected socket.
  // No IP_PKTINFO: the socket is bound to one address (never the wildcard),
  // so a datagram it receives was sent to that address; the control message
  // cost every read.
  if (e->v6_) {
    const int pmtu = IPV6_PMTUDISC_DO;
    if (setsockopt(e->fd_, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0 ||
        setsockopt(e->fd_, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof(pmtu)) != 0)
      return Status(errno);
  } else {
    const int pmtu = IP_PMTUDISC_DO;
    if (setsockopt(e->fd_, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) != 0) return Status(errno);
  }
  if (o.reuse_addr && setsockopt(e->fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
    return Status(errno);
  // A GSO send (ours or another sender's) may then arrive as one datagram
  // with its segment size. Kernels before 5.0 lack it: one read per packet.
  (void)setsockopt(e->fd_, SOL_UDP, UDP_GRO, &one, sizeof(one));
  // Bursts (a window of packets, READ responses) must not overflow the
  // socket: RC would recover, but every overflow costs a timeout. The
  // *FORCE variants exceed net.core.[rw]mem_max when privileged.
  for (int opt : {SO_RCVBUFFORCE, SO_SNDBUFFORCE})
    if (setsockopt(e->fd_, SOL_SOCKET, opt, &buf, sizeof(buf)) != 0)
      setsockopt(e->fd_, SOL_SOCKET, opt == SO_RCVBUFFORCE ? SO_RCVBUF : SO_SNDBUF, &buf, sizeof(buf));
  SockAddr a = sockaddr_of(o.bind);
  if (bind(e->fd_, a.get(), a.len) != 0) return Status(errno);
  if (o.join_on) {
    ip_mreq m{};
    m.imr_multiaddr.s_addr = o.bind.ip.ip4();
    m.imr_interface.s_addr = o.join_on;
    if (e->v6_) return Status(EINVAL);  // IPv4 groups only
    if (setsockopt(e->fd_, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m)) != 0) return Status(errno);
  } else if (o.connect_to.ip.empty() && !e->v6_) {
    // A sender: datagrams to a multicast group (UD) leave through the
    // interface of the bound address (and loop back to this host's members).
    in_addr i{};
    i.s_addr = o.bind.ip.ip4();
    (void)setsockopt(e->fd_, IPPROTO_IP, IP_MULTICAST_IF, &i, sizeof(i));
  }
  socklen_t al = sizeof(a.in6);
  getsockname(e->fd_, &a.sa, &al);
  e->local_ = udp_addr_of(a.get());
  if (!o.connect_to.ip.empty()) {
    const SockAddr c = sockaddr_of(o.connect_to);
    if (connect(e->fd_, c.get(), c.len) != 0) return Status(errno);
    e->from_ = o.connect_to;
  }
  if (o.timestamps) e->timestamps_ = setsockopt(e->fd_, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)) == 0;
  if (o.ecn) {
    // What it sends is ECN-capable (for UDP, Linux keeps the ECN bits of
    // IP_TOS as given); what it receives comes with its TOS.
    const int ect = wire::kEcnEct0;
    e->tos_ = wire::kEcnEct0;
    if (e->v6_) {
      (void)setsockopt(e->fd_, IPPROTO_IPV6, IPV6_TCLASS, &ect, sizeof(ect));
      (void)setsockopt(e->fd_, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof(one));
    } else {
      (void)setsockopt(e->fd_, IPPROTO_IP, IP_TOS, &ect, sizeof(ect));
      (void)setsockopt(e->fd_, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
    }
  }
  if (o.faults.any()) e->faults_ = std::make_unique<FaultInjector>(o.faults);
  if (o.capture_to) {
    e->capture_ = o.capture_to;
  } else if (!o.capture.empty()) {
    auto w = wire::PcapWriter::open(o.capture);
    if (!w.is_ok()) return Status(w.err());
    e->capture_ = std::move(w.value());
  }
  return e;
}

std::unique_ptr<UdpEndpoint> UdpEndpoint::adopt(int fd) {
  std::unique_ptr<UdpEndpoint> e(new UdpEndpoint());
  e->fd_ = fd;
  sockaddr_in6 a{};
  socklen_t al = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &al);
  e->local_ = udp_addr_of(reinterpret_cast<const sockaddr*>(&a));
  e->v6_ = !e->local_.ip.is_v4();
  return e;
}

UdpEndpoint::~UdpEndpoint() {
  if (fd_ >= 0) close(fd_);
}

void UdpEndpoint::transmit(std::span<const uint8_t> d, const UdpAddr& to) {
  const SockAddr a = sockaddr_of(to);
  for (int tries = 0;;) {
    ssize_t n = sys_sendto(fd_, d.data(), d.size(), a.get(), a.len);
    if (n == ssize_t(d.size())) {
      ++stats_->sent;
      stats_->sent_bytes += d.size();
      return;
    }
    if (n < 0 && retry_send(&tries)) continue;
    ++stats_->send_errors;
    return;
  }
}

Status UdpEndpoint::send(wire::Packet& p, const UdpAddr& to) {
  const size_t n = wire::encoded_size(p);
  if (!n) return Status(EINVAL);
  if (corked_ && !faults_) {
    const size_t off = queue_len_;
    // Grown (and zeroed) only when too small; packets are written over what
    // the last burst left.
    if (queue_.size() < off + n + wire::kIcrcBytes)
      queue_.resize(std::max(2 * queue_.size(), off + n + 4096));
    if (wire::encode(p, queue_.data() + off, n + wire::kIcrcBytes) != n) return Status(EINVAL);
    queue_len_ = off + n + wire::kIcrcBytes;
    pending_.push_back(Queued{off, uint32_t(n + wire::kIcrcBytes), to});
    if (queue_len_ >= kQueueBytes) send_queued();
    return Status::ok();
  }
  tx_.resize(n + wire::kIcrcBytes);
  if (wire::encode(p, tx_.data(), tx_.size()) != n) return Status(EINVAL);
  seal(tx_.data(), tx_.size(), to, 0, true);
  if (faults_)
    faults_->process(tx_, emit_to(), tag_of(to));
  else
    transmit(tx_, to);
  return Status::ok();
}

void UdpEndpoint::seal(uint8_t* d, size_t len, const UdpAddr& to, uint16_t id, bool capture) {
  const size_t n = len - wire::kIcrcBytes;
  wire::put_icrc(d + n,
                 v6_ ? icrc_v6(local_, to, {d, n})
                     : icrc_.compute({local_.ip.raw4(), to.ip.raw4(), local_.port, to.port}, id, {d, n}));
  if (capture && capture_) {
    uint8_t hdr[kMaxIpUdpHeaders];
    const size_t hl = ip_udp_headers(local_, to, len, hdr, id, d, tos_);
    capture_->write({hdr, hl}, {d, len}, wall_ns(), true);
  }
}

void UdpEndpoint::send_queued() {
  // Runs: consecutive packets to one destination, all of the first one's
  // size except a shorter last (what GSO cuts a send into), within one
  // datagram's size limit. They lie back to back in queue_: one iovec each.
  struct Msg {
    size_t first, count, bytes;
  };
  Msg runs[kSendBatch];
  size_t i = 0;
  while (i < pending_.size()) {
    int m = 0;
    for (; m < kSendBatch && i < pending_.size(); ++m) {
      const Queued& a = pending_[i];
      size_t j = i + 1, bytes = a.len;
      if (gso_) {
        while (j < pending_.size() && j - i < size_t(kMaxGsoSegments)) {
          const Queued& b = pending_[j];
          if (!same_addr(b.to, a.to) || b.len > a.len || bytes + b.len > kMaxUdpPayload) break;
          bytes += b.len;
          ++j;
          if (b.len < a.len) break;  // a shorter packet ends the run
        }
      }
      // The k-th datagram of a GSO send carries identification k.
      for (size_t k = i; k < j; ++k)
        seal(queue_.data() + pending_[k].off, pending_[k].len, pending_[k].to, uint16_t(k - i), true);
      runs[m] = Msg{i, j - i, bytes};
      i = j;
    }
    mmsghdr msgs[kSendBatch];
    iovec iov[kSendBatch];
    SockAddr to[kSendBatch];
    alignas(cmsghdr) char ctl[kSendBatch][CMSG_SPACE(sizeof(uint16_t))];
    for (int k = 0; k < m; ++k) {
      const Queued& a = pending_[runs[k].first];
      iov[k] = iovec{queue_.data() + a.off, runs[k].bytes};
      to[k] = sockaddr_of(a.to);
      msgs[k].msg_hdr = msghdr{&to[k].sa, to[k].len, &iov[k], 1, nullptr, 0, 0};
      msgs[k].msg_len = 0;
      if (runs[k].count > 1) {
        msgs[k].msg_hdr.msg_control = ctl[k];
        msgs[k].msg_hdr.msg_controllen = sizeof(ctl[k]);
        cmsghdr* c = CMSG_FIRSTHDR(&msgs[k].msg_hdr);
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        const uint16_t seg = uint16_t(a.len);
        memcpy(CMSG_DATA(c), &seg, sizeof(seg));
      }
    }
    for (int k = 0, tries = 0; k < m;) {
      // One message: sendmsg (sendmmsg's extra copies cost ~50 ns here).
      const int sent = m - k == 1 ? (sys_sendmsg(fd_, &msgs[k].msg_hdr, 0) >= 0 ? 1 : -1)
                                  : sys_sendmmsg(fd_, msgs + k, unsigned(m - k), 0);
      if (sent > 0) {
        for (int x = k; x < k + sent; ++x) {
          stats_->sent += runs[x].count;
          stats_->sent_bytes += runs[x].bytes;
        }
        k += sent;
        tries = 0;
        continue;
      }
      if (retry_send(&tries)) continue;
      if (runs[k].count > 1 && (errno == EINVAL || errno == EIO)) {
        // The kernel refused the GSO send (no UDP_SEGMENT before Linux 4.18,
        // or a device path without checksum offload): from now on one
        // datagram per packet, each with identification 0. (The capture
        // already holds them, with the identifications they would have had.)
        // Other errors (EPERM: netfilter dropped it on its way out) are losses.
        gso_ = false;
        for (size_t x = runs[k].first; x < runs[k].first + runs[k].count; ++x) {
          const Queued& q = pending_[x];
          seal(queue_.data() + q.off, q.len, q.to, 0, false);
          transmit({queue_.data() + q.off, q.len}, q.to);
        }
        ++k;
        tries = 0;
        continue;
      }
      stats_->send_errors += runs[k].count;
      ++k;
      tries = 0;
    }
  }
  pending_.clear();
  queue_len_ = 0;
}

void UdpEndpoint::flush() {
  if (faults_) faults_->flush(emit_to());
}

FaultInjector::Emit UdpEndpoint::emit_to() {
  return [this](std::span<const uint8_t> d, uint64_t tag) { transmit(d, tags_[tag]); };
}

uint64_t UdpEndpoint::tag_of(const UdpAddr& to) {
  for (size_t i = 0; i < tags_.size(); ++i)
    if (same_addr(tags_[i], to)) return i;
  tags_.push_back(to);
  return tags_.size() - 1;
}

int UdpEndpoint::poll(OnPacket on_packet, int max, bool* more) {
  int released = 0;
  if (trust_.parked()) {
    trust_.recheck(now_ns(), [&](std::span<const uint8_t> p, uint32_t saddr, uint16_t sport, uint16_t id) {
      ++released;
      hand_on(p, UdpAddr{IpAddr::v4(saddr), sport}, id, on_packet, {});  // how they came: not kept
    });
  }
  mmsghdr msgs[kBatch];
  iovec iov[kBatch];
  sockaddr_in6 from[kBatch];  // or sockaddr_in
  alignas(cmsghdr) char ctl[kBatch][CMSG_SPACE(sizeof(in_pktinfo)) + 2 * CMSG_SPACE(sizeof(int)) +
                                    CMSG_SPACE(sizeof(timespec))];
  // A quiet socket (the last read found at most one datagram) is read with
  // one recvmsg: recvmmsg also tries a second entry, which costs a datagram
  // ~0.3 us more on its way in here. After a datagram, the next read is a
  // batch again.
  const int want = quiet_ ? 1 : max < kBatch ? max : kBatch;
  if (rx_.empty()) rx_.resize(size_t(kBatch) * kMaxDatagram);  // sending-only endpoints never need it
  for (int i = 0; i < want; ++i) {
    iov[i] = iovec{rx_.data() + size_t(i) * kMaxDatagram, kMaxDatagram};
    // A connected socket receives from its peer only: no address to ask for.
    const bool ask = from_.ip.empty();
    msgs[i].msg_hdr = msghdr{ask ? &from[i] : nullptr,
                             socklen_t(ask ? sizeof(from[i]) : 0),
                             &iov[i],
                             1,
                             ctl[i],
                             sizeof(ctl[i]),
                             0};
    msgs[i].msg_len = 0;
  }
  int got;
  if (want == 1) {
    const ssize_t n = sys_recvmsg(fd_, &msgs[0].msg_hdr, MSG_DONTWAIT);
    got = n >= 0 ? 1 : -1;
    if (n >= 0) msgs[0].msg_len = unsigned(n);
  } else {
    got = sys_recvmmsg(fd_, msgs, unsigned(want), MSG_DONTWAIT);
  }
  quiet_ = want == 1 ? got <= 0 : got <= 1;
  if (more) *more = got == want;
  if (got <= 0) {
    // A connected socket reports an ICMP error (ECONNREFUSED: nobody listened
    // at the peer yet) once, through the next receive: nothing to do for RC,
    // which retransmits.
    return released;
  }
  // The kernel stamps with CLOCK_REALTIME: a datagram's age now, taken
  // from the fast clock's now, is its arrival on the fast clock.
  const uint64_t wall = timestamps_ ? wall_ns() : 0;
  const uint64_t fast = timestamps_ ? fast_now_ns() : 0;
  for (int i = 0; i < got; ++i) {
    const UdpAddr src = from_.ip.empty() ? udp_addr_of(reinterpret_cast<const sockaddr*>(&from[i])) : from_;
    const UdpAddr& dst = local_;
    size_t seg = 0;
    Arrival arrived;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
      if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
        int v;
        memcpy(&v, CMSG_DATA(c), sizeof(v));
        seg = v > 0 ? size_t(v) : 0;
      } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
        timespec ts;
        memcpy(&ts, CMSG_DATA(c), sizeof(ts));
        const uint64_t at = uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
        arrived.ns = fast - std::min(wall > at ? wall - at : 0, fast - 1);
      } else if ((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) ||
                 (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS)) {
        // IP_TOS: one byte; IPV6_TCLASS: an int.
        int tos = 0;
        if (c->cmsg_type == IP_TOS)
          tos = *CMSG_DATA(c);
        else
          memcpy(&tos, CMSG_DATA(c), sizeof(tos));
        arrived.tos = uint8_t(tos);
      }
    }
    deliver(static_cast<const uint8_t*>(iov[i].iov_base), msgs[i].msg_len, seg, src, dst, arrived, on_packet);
  }
  return got + released;
}

void UdpEndpoint::deliver(const uint8_t* d, size_t len, size_t seg, const UdpAddr& src, const UdpAddr& dst,
                          Arrival arrived, OnPacket on_packet) {
  if (!seg || seg > len) seg = len;
  for (size_t at = 0; at < len; at += seg) {
    const uint8_t* p = d + at;
    const size_t n = std::min(seg, len - at);
    ++stats_->received;
    if (n < wire::kBthBytes + wire::kIcrcBytes) {
      ++stats_->bad_icrc;
      continue;
    }
    const size_t ib = n - wire::kIcrcBytes;
    const uint32_t carried = wire::get_icrc(p + ib);
    if (v6_) {
      if (icrc_v6(src, dst, {p, ib}) != carried) {
        ++stats_->bad_icrc;  // dropped silently (IBA Vol. 1 7.8.1; the compliance suite's v1c07-007)
        continue;
      }
      hand_on({p, n}, src, 0, on_packet, arrived);
      continue;
    }
    // Over IPv4, the identification the ICRC was computed with (one, or none).
    const int id = icrc_.solve({src.ip.raw4(), dst.ip.raw4(), src.port, dst.port}, {p, ib}, carried);
    if (id < 0) {
      ++stats_->bad_icrc;
      if (trust_.parked()) trust_.saw_other(src.ip.raw4());
      continue;
    }
    if (id < IdTrust::kOwnIds) {
      if (trust_.parked()) trust_.saw_other(src.ip.raw4());
      hand_on({p, n}, src, uint16_t(id), on_packet, arrived);  // uroce's senders: believed as is
      continue;
    }
    trust_.judge(
        {p, n}, src.ip.raw4(), src.port, dst.ip.raw4(), uint16_t(id), now_ns(),
        [&](std::span<const uint8_t> q, uint32_t saddr, uint16_t sport, uint16_t qid) {
          // (or one parked earlier, whose arrival is not kept)
          hand_on(q, UdpAddr{IpAddr::v4(saddr), sport}, qid, on_packet, q.data() == p ? arrived : Arrival{});
        });
  }
}

void UdpEndpoint::hand_on(std::span<const uint8_t> p, const UdpAddr& src, uint16_t id, OnPacket on_packet,
                          Arrival arrived) {
  // Captured once it is known to be a RoCE packet (what failed the ICRC is
  // only counted: the capture shows what the transport saw).
  if (capture_) {
    uint8_t hdr[kMaxIpUdpHeaders];
    const size_t hl = ip_udp_headers(src, local_, p.size(), hdr, id, p.data(), arrived.tos);
    capture_->write({hdr, hl}, p, wall_ns(), false);
  }
  decode_and_hand_on(p, *stats_, src, local_, on_packet, arrived.ns,
                     (arrived.tos & wire::kEcnMask) == wire::kEcnCe);
}

}  // namespace uroce::link
