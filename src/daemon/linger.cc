#include "daemon/linger.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "transport/psn.h"
#include "wire/ip_udp.h"
#include "wire/packet.h"

namespace uroce::daemon {

namespace {
constexpr uint64_t kLingerNs = 3'000'000'000ull;  // covers retry_cnt 7 x timeout 14 (67 ms) several times
}

void Lingers::add(int rx_fd, uint32_t qpn, uint32_t dest_qpn, uint32_t epsn, uint32_t msn, uint16_t sport,
                  uint64_t now) {
  Entry e;
  sockaddr_in6 peer{};  // or sockaddr_in
  socklen_t pl = sizeof(peer);
  if (getpeername(rx_fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) {
    close(rx_fd);
    return;
  }
  e.rx = link::UdpEndpoint::adopt(rx_fd);
  e.peer = link::udp_addr_of(reinterpret_cast<const sockaddr*>(&peer));
  e.peer.port = wire::kRoceV2Port;
  // ACKs leave from the flow's source port, like the QP's own did.
  link::UdpEndpoint::Options o;
  o.bind = link::UdpAddr{e.rx->local().ip, sport};
  o.reuse_addr = true;
  auto tx = link::UdpEndpoint::open(o);
  if (!tx.is_ok()) return;  // e.rx closes the socket
  e.tx = std::move(tx.value());
  e.qpn = qpn;
  e.dest_qpn = dest_qpn;
  e.epsn = epsn;
  e.msn = msn;
  e.until = now + kLingerNs;
  by_fd_[rx_fd] = std::move(e);
}

void Lingers::on_readable(int fd, uint64_t, FnRef<int32_t(uint32_t qpn)> owner_pid) {
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return;
  Entry& e = it->second;
  e.rx->poll([&](const wire::Packet& p, const link::UdpAddr& from, const link::UdpAddr& to) {
    if (p.bth.dest_qp != e.qpn) {
      if (const int32_t pid = owner_pid(p.bth.dest_qp)) (void)forward_.add_for(pid, p, from, to);
      return;
    }
    const wire::OpInfo* info = wire::op_info(p.bth.opcode);
    if (!info || !(info->flags & wire::kRequest)) return;
    // RC, or an XRC target QP (RC's responder with XRC opcodes): a SEND or
    // WRITE below the expected PSN was executed; its ACK is of the same service.
    const auto service = wire::Service(p.bth.opcode >> 5);
    if ((service != wire::Service::kRc && service != wire::Service::kXrc) ||
        !(info->flags & (wire::kSendOp | wire::kWriteOp)))
      return;
    if (transport::psn_diff(p.bth.psn, e.epsn) >= 0) return;  // never executed: nothing to say
    wire::Packet a;
    a.bth.opcode = wire::opcode(service, wire::kAcknowledge);
    a.bth.dest_qp = e.dest_qpn;
    a.bth.psn = p.bth.psn;
    a.syndrome = wire::syndrome_ack(wire::kCreditsInvalid);
    a.msn = e.msn;
    (void)e.tx->send(a, e.peer);
    ++e.acked;
  });
  (void)forward_.flush();
}

void Lingers::log_end(const Entry& e) {
  UROCE_INFO("uroced: QP %u gone for good (acknowledged %llu duplicates after its destruction)", e.qpn,
             (unsigned long long)e.acked);
}

}  // namespace uroce::daemon
