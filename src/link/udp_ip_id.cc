// The IPv4 identification of a connected UDP endpoint (see the header
// comment of link/udp_link.h and docs/network-link.md "The IPv4
// identification"): learning the sending socket's counter, the first
// datagram sent twice, and which identifications a receiver believes.
#include <arpa/inet.h>
#include <linux/net_tstamp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "common/clock.h"
#include "link/udp_link.h"

namespace uroce::link {

namespace {
// Receiving: how far a connected sender's counter may have moved on since
// its last datagram seen (lost datagrams, probes) or lag behind (a GSO send
// takes one step of the counter for all its datagrams, which carry id + k).
constexpr uint16_t kIdAhead = 1024, kIdBehind = 256;
}  // namespace

void UdpEndpoint::send_failed(int err) {
  if (!counted_ || err == EAGAIN || err == EINTR || err == ECONNREFUSED) return;
  // Linux may have counted the datagram: learn the counter again. (If even
  // that fails, the peer drops what follows as unproven and RC retransmits
  // into the next attempt.)
  ++stats_.id_relearned;
  (void)learn_id();
}

bool UdpEndpoint::learn_id() {
  // One datagram to a socket of our own, with a software transmit timestamp:
  // Linux returns the timestamp on the error queue together with the
  // datagram as the device got it, link, IPv4 and UDP headers included
  // (unprivileged unless net.core.tstamp_allow_data is 0). A connected
  // socket numbers every datagram it sends, to its peer or not.
  const int sink = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (sink < 0) return false;
  sockaddr_in sa = sockaddr_of(UdpAddr{local_.ip, 0}).in;
  socklen_t sl = sizeof(sa);
  bool ok = bind(sink, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 &&
            getsockname(sink, reinterpret_cast<sockaddr*>(&sa), &sl) == 0;
  const int on = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE, off = 0;
  ok = ok && setsockopt(fd_, SOL_SOCKET, SO_TIMESTAMPING, &on, sizeof(on)) == 0;
  if (ok) {
    const uint8_t probe = 0;
    ok = sendto(fd_, &probe, 1, 0, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) == 1;
    (void)setsockopt(fd_, SOL_SOCKET, SO_TIMESTAMPING, &off, sizeof(off));
  }
  bool found = false;
  const uint64_t deadline = now_ns() + 200'000'000ull;
  while (ok && !found && now_ns() < deadline) {
    pollfd pf{fd_, 0, 0};  // POLLERR: the error queue holds something
    if (::poll(&pf, 1, 20) <= 0 || !(pf.revents & POLLERR)) continue;
    uint8_t d[256];
    alignas(cmsghdr) char ctl[256];
    iovec iov{d, sizeof(d)};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof(ctl);
    const ssize_t n = recvmsg(fd_, &m, MSG_ERRQUEUE | MSG_DONTWAIT);
    if (n < 0) break;
    ok = false;  // one probe, one answer: without the headers in it, no counter
    // The IPv4 header of our probe, after whatever link header the device has.
    for (size_t at = 0; at + 29 <= size_t(n) && at <= 64; ++at) {
      const uint8_t* ip = d + at;
      uint32_t src, dst;
      memcpy(&src, ip + 12, 4);
      memcpy(&dst, ip + 16, 4);
      if (ip[0] != 0x45 || ip[9] != IPPROTO_UDP || src != local_.ip.ip4() || dst != sa.sin_addr.s_addr)
        continue;
      uint16_t dport;
      memcpy(&dport, ip + 22, 2);
      if (dport != sa.sin_port) continue;
      next_id_ = uint16_t((ip[4] << 8 | ip[5]) + 1);
      found = true;
      break;
    }
  }
  // Nothing else may stay queued there (the socket's readers never look).
  for (uint8_t d[64]; recv(fd_, d, sizeof(d), MSG_ERRQUEUE | MSG_DONTWAIT) >= 0;) {
  }
  close(sink);
  return found;
}

void UdpEndpoint::prime(uint8_t* d, size_t len) {
  // A receiver believes a counter it has not seen yet only from two
  // datagrams in a row (see id_ok): the first datagram goes twice. To RC a
  // copy is a duplicate; the receiver drops this one, unproven.
  primed_ = true;
  seal(d, len, peer_, next_id_, false);
  transmit({d, len}, peer_);
}

bool UdpEndpoint::id_ok(const UdpAddr& src, uint32_t dqp, uint16_t id) {
  // An unconnected sender: each send counts from 0.
  if (id < kMaxGsoSegments) return true;
  // A connected sender's counter, which starts anywhere. Any identification
  // solves the ICRC of a corrupted packet with a chance of 1 / 2^16, so one
  // is believed only where it continues the counter of its flow (address and
  // destination QP): within a window of its last value, or right after an
  // unproven one (the sender sends its first datagram twice). A corrupted
  // packet then passes with a chance of ~(64 + window) / 2^32. Two flows
  // from one address (two QPs whose source ports hashed alike) have an entry
  // each, however close their counters.
  for (IdFlow& f : id_flows_) {
    if (!f.known || f.dqp != dqp || !same_addr(f.src, src)) continue;
    if (uint16_t(id - f.next) < kIdAhead) {
      f.next = uint16_t(id + 1);
      return true;
    }
    if (uint16_t(f.next - id) <= kIdBehind) return true;
  }
  if (id_candidate_known_ && same_addr(id_candidate_src_, src) && id_candidate_dqp_ == dqp &&
      id == id_candidate_) {
    id_candidate_known_ = false;
    IdFlow& f = id_flows_[id_victim_];
    id_victim_ = (id_victim_ + 1) % kIdFlows;
    f = IdFlow{src, dqp, uint16_t(id + 1), true};
    return true;
  }
  id_candidate_known_ = true;
  id_candidate_src_ = src;
  id_candidate_dqp_ = dqp;
  id_candidate_ = uint16_t(id + 1);
  return false;
}

}  // namespace uroce::link
