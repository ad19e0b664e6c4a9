#include "daemon/linger.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "wire/ip_udp.h"
#include "wire/packet.h"

namespace uroce::daemon {

namespace {
constexpr uint64_t kLingerNs = 3'000'000'000ull;  // covers retry_cnt 7 x timeout 14 (67 ms) several times
}

/// What a lingering QP's responder may do: send acknowledgements. It never
/// asks for memory or receive queues (ResponderConfig::lingering).
class Lingers::Env : public transport::ResponderEnv {
 public:
  explicit Env(Entry* e) : e_(e) {}
  bool claim_recv(transport::RecvTarget*) override { return false; }
  transport::Access place_recv(const transport::RecvTarget&, uint64_t, std::span<const uint8_t>) override {
    return transport::Access::kAccessError;
  }
  void complete_recv(const transport::RecvTarget&, transport::WcStatus, uint32_t,
                     const transport::RecvInfo&) override {}
  uint8_t* remote_memory(uint32_t, uint64_t, uint64_t, uint32_t) override { return nullptr; }
  uint64_t atomic(uint8_t*, bool, uint64_t, uint64_t) override { return 0; }
  void send(wire::Packet& p) override { (void)e_->tx->send(p, e_->peer); }
  void qp_error(transport::AsyncEvent) override {}

 private:
  Entry* e_;
};

Lingers::Entry::Entry() = default;
Lingers::Entry::~Entry() = default;

void Lingers::add(int rx_fd, const LingerArgs& a, uint64_t now) {
  sockaddr_in6 peer{};  // or sockaddr_in
  socklen_t pl = sizeof(peer);
  if (getpeername(rx_fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) {
    close(rx_fd);
    return;
  }
  auto e = std::make_unique<Entry>();
  e->rx = link::UdpEndpoint::adopt(rx_fd);
  e->peer = link::udp_addr_of(reinterpret_cast<const sockaddr*>(&peer));
  e->peer.port = wire::kRoceV2Port;
  // ACKs leave from the flow's source port, like the QP's own did.
  link::UdpEndpoint::Options o;
  o.bind = link::UdpAddr{e->rx->local().ip, a.sport};
  o.reuse_addr = true;
  auto tx = link::UdpEndpoint::open(o);
  if (!tx.is_ok()) return;  // e->rx closes the socket
  e->tx = std::move(tx.value());
  e->qpn = a.qpn;
  e->until = now + kLingerNs;
  // The QP's own responder rules, with its last expected PSN and MSN
  // (transport/rc_responder.h): one home for what a duplicate gets.
  transport::ResponderConfig rc;
  rc.dest_qp = a.dest_qpn;
  rc.epsn = a.epsn;
  rc.msn = a.msn;
  rc.xrc = a.xrc;
  rc.lingering = true;
  e->env = std::make_unique<Env>(e.get());
  e->resp = std::make_unique<transport::RcResponder>(rc, e->env.get());
  by_fd_[rx_fd] = std::move(e);
}

void Lingers::on_readable(int fd, uint64_t, FnRef<int32_t(uint32_t qpn)> owner_pid) {
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return;
  Entry& e = *it->second;
  e.rx->poll([&](const wire::Packet& p, const link::UdpAddr& from, const link::UdpAddr& to) {
    if (p.bth.dest_qp != e.qpn) {
      if (const int32_t pid = owner_pid(p.bth.dest_qp)) (void)forward_.add_for(pid, p, from, to);
      return;
    }
    e.resp->on_request(p);
  });
  (void)forward_.flush();
}

void Lingers::log_end(const Entry& e) {
  UROCE_INFO("uroced: QP %u gone for good (acknowledged %llu duplicates after its destruction)", e.qpn,
             (unsigned long long)e.resp->stats().acks);
}

}  // namespace uroce::daemon
