#include "link/udp_link.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "wire/icrc.h"
#include "wire/ipv4.h"

namespace uroce::link {

namespace {

constexpr size_t kMaxDatagram = 65536;
constexpr int kBatch = 16;
constexpr int kSocketBuffer = 8 << 20;

/// A destination as the fault injector's tag (it may hold a packet back).
uint64_t pack(const UdpAddr& a) { return uint64_t(a.ip) << 16 | a.port; }

uint64_t wall_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

/// The IPv4 and UDP headers Linux writes for this datagram (see the header comment).
void headers_for(const UdpAddr& src, const UdpAddr& dst, size_t len, uint8_t ip[20], uint8_t udp[8]) {
  wire::Ipv4UdpFields f;
  f.src = src.ip;
  f.dst = dst.ip;
  f.sport = src.port;
  f.dport = dst.port;
  wire::build_ipv4_udp(f, len, nullptr, ip, udp);
}

}  // namespace

Result<std::unique_ptr<UdpEndpoint>> UdpEndpoint::open(const Options& o) {
  // The ICRC covers the source address: it must be known, so no wildcard bind.
  if (o.bind.ip == htonl(INADDR_ANY)) return Status(EINVAL);
  std::unique_ptr<UdpEndpoint> e(new UdpEndpoint());
  e->fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (e->fd_ < 0) return Status(errno);
  const int one = 1, pmtu = IP_PMTUDISC_DO, buf = kSocketBuffer;
  // Don't fragment (RoCE packets fit the path MTU by construction), which is
  // also what makes Linux send IP identification 0 on an unconnected socket.
  if (setsockopt(e->fd_, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) != 0 ||
      setsockopt(e->fd_, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one)) != 0)
    return Status(errno);
  if (o.reuse_addr && setsockopt(e->fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
    return Status(errno);
  // Bursts (a window of packets, READ responses) must not overflow the
  // socket: RC would recover, but every overflow costs a timeout. The
  // *FORCE variants exceed net.core.[rw]mem_max when privileged.
  for (int opt : {SO_RCVBUFFORCE, SO_SNDBUFFORCE})
    if (setsockopt(e->fd_, SOL_SOCKET, opt, &buf, sizeof(buf)) != 0)
      setsockopt(e->fd_, SOL_SOCKET, opt == SO_RCVBUFFORCE ? SO_RCVBUF : SO_SNDBUF, &buf, sizeof(buf));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = o.bind.ip;
  a.sin_port = htons(o.bind.port);
  if (bind(e->fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return Status(errno);
  socklen_t al = sizeof(a);
  getsockname(e->fd_, reinterpret_cast<sockaddr*>(&a), &al);
  e->local_ = UdpAddr{a.sin_addr.s_addr, ntohs(a.sin_port)};
  if (o.connect_to.ip) {
    sockaddr_in c{};
    c.sin_family = AF_INET;
    c.sin_addr.s_addr = o.connect_to.ip;
    c.sin_port = htons(o.connect_to.port);
    if (connect(e->fd_, reinterpret_cast<sockaddr*>(&c), sizeof(c)) != 0) return Status(errno);
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
  sockaddr_in a{};
  socklen_t al = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &al);
  e->local_ = UdpAddr{a.sin_addr.s_addr, ntohs(a.sin_port)};
  return e;
}

UdpEndpoint::~UdpEndpoint() {
  if (fd_ >= 0) close(fd_);
}

void UdpEndpoint::transmit(std::span<const uint8_t> d, const UdpAddr& to) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = to.ip;
  a.sin_port = htons(to.port);
  for (int tries = 0;; ++tries) {
    ssize_t n = sendto(fd_, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    if (n == ssize_t(d.size())) {
      ++stats_.sent;
      return;
    }
    // A full socket buffer is a lost packet to RC, which retransmits; retry
    // a few times first so a burst does not turn into losses needlessly.
    if (n < 0 && (errno == EAGAIN || errno == ENOBUFS || errno == EINTR) && tries < 64) {
      cpu_relax();
      continue;
    }
    ++stats_.send_errors;
    return;
  }
}

Status UdpEndpoint::send(wire::Packet& p, const UdpAddr& to) {
  const size_t n = wire::encoded_size(p);
  if (!n) return Status(EINVAL);
  tx_.resize(n + wire::kIcrcBytes);
  if (wire::encode(p, tx_.data(), tx_.size()) != n) return Status(EINVAL);
  uint8_t hdr[28];
  headers_for(local_, to, tx_.size(), hdr, hdr + 20);
  wire::put_icrc(tx_.data() + n, wire::icrc({hdr, 20}, {hdr + 20, 8}, {tx_.data(), n}));
  if (capture_) capture_->write({hdr, 28}, tx_, wall_ns(), true);
  if (faults_)
    faults_->process(tx_, emit_to(), pack(to));
  else
    transmit(tx_, to);
  return Status::ok();
}

void UdpEndpoint::flush() {
  if (faults_) faults_->flush(emit_to());
}

FaultInjector::Emit UdpEndpoint::emit_to() {
  return [this](std::span<const uint8_t> d, uint64_t tag) {
    transmit(d, UdpAddr{uint32_t(tag >> 16), uint16_t(tag)});
  };
}

int UdpEndpoint::poll(const OnPacket& on_packet, int max) {
  mmsghdr msgs[kBatch];
  iovec iov[kBatch];
  sockaddr_in from[kBatch];
  alignas(cmsghdr) char ctl[kBatch][CMSG_SPACE(sizeof(in_pktinfo))];
  const int want = max < kBatch ? max : kBatch;
  if (rx_.empty()) rx_.resize(size_t(kBatch) * kMaxDatagram);  // sending-only endpoints never need it
  for (int i = 0; i < want; ++i) {
    iov[i] = iovec{rx_.data() + size_t(i) * kMaxDatagram, kMaxDatagram};
    msgs[i].msg_hdr = msghdr{&from[i], sizeof(from[i]), &iov[i], 1, ctl[i], sizeof(ctl[i]), 0};
    msgs[i].msg_len = 0;
  }
  const int got = recvmmsg(fd_, msgs, unsigned(want), MSG_DONTWAIT, nullptr);
  if (got <= 0) {
    // A connected socket reports an ICMP error (ECONNREFUSED: nobody listened
    // at the peer yet) once, through the next receive: nothing to do for RC,
    // which retransmits.
    return 0;
  }
  for (int i = 0; i < got; ++i) {
    ++stats_.received;
    const uint8_t* d = static_cast<const uint8_t*>(iov[i].iov_base);
    const size_t len = msgs[i].msg_len;
    UdpAddr src{from[i].sin_addr.s_addr, ntohs(from[i].sin_port)};
    UdpAddr dst = local_;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c))
      if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO)
        dst.ip = reinterpret_cast<const in_pktinfo*>(CMSG_DATA(c))->ipi_addr.s_addr;
    uint8_t hdr[28];
    headers_for(src, dst, len, hdr, hdr + 20);
    if (len < wire::kBthBytes + wire::kIcrcBytes ||
        wire::icrc({hdr, 20}, {hdr + 20, 8}, {d, len - wire::kIcrcBytes}) != wire::get_icrc(d + len - 4)) {
      ++stats_.bad_icrc;  // IBA C17-? : a packet with a bad ICRC is dropped silently
      continue;
    }
    // Captured once it is known to be a RoCE packet (what failed the ICRC is
    // only counted: the capture shows what the transport saw).
    if (capture_) capture_->write({hdr, 28}, {d, len}, wall_ns(), false);
    wire::Packet p;
    const wire::DecodeError e = wire::decode({d, len}, &p);
    if (e == wire::DecodeError::kCnp) {
      ++stats_.cnp;
      continue;
    }
    if (e != wire::DecodeError::kNone) {
      ++stats_.malformed;
      continue;
    }
    on_packet(p, src, dst);
  }
  return got;
}

}  // namespace uroce::link
