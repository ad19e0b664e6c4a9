#include "daemon/gsi.h"

#include <cstring>

#include "common/log.h"
#include "wire/cm_mad.h"
#include "wire/ip_udp.h"
#include "wire/opcodes.h"

namespace uroce::daemon {

bool Gsi::start() {
  auto in = core::NetInbox::open(core::kGsiOwner);
  if (!in.is_ok()) {
    UROCE_WARN("uroced: QP1's inbox cannot be bound (%s): the CM's messages go elsewhere",
               strerror(in.err()));
    return false;
  }
  inbox_ = std::move(in.value());
  return true;
}

void Gsi::open(const std::vector<core::DeviceInfo>& devices, FnRef<void(int fd)> watch) {
  for (const core::DeviceInfo& d : devices) {
    if (d.is_loopback) continue;  // connections on lo stay between uroced's clients
    for (uint32_t g = 0; g < d.num_gids && g < core::kMaxGids; ++g) {
      if (d.gid_types[g] != uint32_t(core::GidType::kRoceV2)) continue;
      const link::IpAddr ip = link::IpAddr::of_gid(d.gids[g], d.ifindex);
      if (ip.link_local()) continue;
      bool have = false;
      for (const auto& [fd, p] : ports_) have = have || p.ep->local().ip == ip;
      if (have) continue;
      link::UdpEndpoint::Options o;
      o.bind = link::UdpAddr{ip, wire::kRoceV2Port};
      o.reuse_addr = true;
      auto ep = link::UdpEndpoint::open(o);
      if (!ep.is_ok()) {
        UROCE_WARN("uroced: QP1 on %s: %s", link::to_string(ip).c_str(), strerror(ep.err()));
        continue;
      }
      const int fd = ep.value()->fd();
      ports_[fd] = Port{std::move(ep.value()), d.node_guid};
      watch(fd);
    }
  }
}

std::vector<int> Gsi::fds() const {
  std::vector<int> out;
  for (const auto& [fd, p] : ports_) out.push_back(fd);
  return out;
}

bool Gsi::parked() const {
  for (const auto& [fd, p] : ports_)
    if (p.ep->parked()) return true;
  return false;
}

void Gsi::handle(const wire::Packet& p, const link::UdpAddr& from, const link::UdpAddr& to, OnMad on_mad,
                 OwnerPid owner_pid, bool from_inbox) {
  if (p.bth.dest_qp != wire::cm::kGsiQpn) {
    // Linux gave this socket a datagram of an unconnected flow: it is for
    // the process that owns the QP (a packet from the inbox never is).
    const int32_t pid = from_inbox ? 0 : owner_pid(p.bth.dest_qp);
    if (pid != 0 && forward_.add_for(pid, p, from, to) == core::NetForward::kPassed)
      ++stats_.passed_on;
    else
      ++stats_.no_owner;
    return;
  }
  // IBA 13.5.1: QP1 takes UD SENDs of one MAD with the GSI's Q_Key (rxe
  // drops others too: its check_keys).
  if (p.bth.opcode != wire::opcode(wire::Service::kUd, wire::kSendOnly) || p.qkey != wire::cm::kGsiQkey ||
      p.payload.size() != wire::cm::kMadSize) {
    ++stats_.not_mad;
    return;
  }
  ++stats_.received;
  on_mad(p.payload, from, to);
}

void Gsi::on_readable(int fd, OnMad on_mad, OwnerPid owner_pid) {
  if (inbox_ && fd == inbox_->fd()) {
    inbox_->poll([&](const wire::Packet& p, const link::UdpAddr& from,
                     const link::UdpAddr& to) { handle(p, from, to, on_mad, owner_pid, true); },
                 64);
    return;
  }
  auto it = ports_.find(fd);
  if (it == ports_.end()) return;
  it->second.ep->poll([&](const wire::Packet& p, const link::UdpAddr& from, const link::UdpAddr& to) {
    handle(p, from, to, on_mad, owner_pid, false);
  });
  (void)forward_.flush();
}

bool Gsi::send(const link::IpAddr& local, const link::IpAddr& remote, std::span<const uint8_t> mad) {
  for (auto& [fd, port] : ports_) {
    if (!(port.ep->local().ip == local)) continue;
    wire::Packet p;
    p.bth.opcode = wire::opcode(wire::Service::kUd, wire::kSendOnly);
    p.bth.dest_qp = wire::cm::kGsiQpn;
    p.bth.psn = psn_++ & 0xffffff;
    p.qkey = wire::cm::kGsiQkey;
    p.src_qp = wire::cm::kGsiQpn;
    p.payload = mad;
    const Status s = port.ep->send(p, link::UdpAddr{remote, wire::kRoceV2Port});
    if (s.is_ok()) {
      ++stats_.sent;
      return true;
    }
    break;
  }
  ++stats_.send_errors;
  return false;
}

uint64_t Gsi::node_guid(const link::IpAddr& local) const {
  for (const auto& [fd, p] : ports_)
    if (p.ep->local().ip == local) return p.guid;
  return 0;
}

}  // namespace uroce::daemon
