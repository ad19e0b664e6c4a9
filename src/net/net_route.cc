#include "net/net_route.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "common/log.h"
#include "contract/limits.h"
#include "link/udp_link.h"
#include "transport/packetizer.h"

namespace uroce::core {

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

}  // namespace

bool unicast_addr(const uint8_t* gid, const DeviceInfo& d, link::IpAddr* out) {
  *out = link::IpAddr::of_gid(gid, d.ifindex);
  return !out->empty() && !out->multicast();
}

uint32_t path_mtu_bytes(uint32_t path_mtu_attr, uint32_t if_mtu) {
  const uint32_t link = transport::pmtu_bytes(active_mtu_enum(if_mtu));
  const uint32_t asked = path_mtu_attr ? transport::pmtu_bytes(path_mtu_attr) : link;
  return asked < link ? asked : link;
}

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

bool wants_network(const DeviceInfo& d, QpType type, const AddressVector& av, uint32_t qpn, uint32_t dest_qpn,
                   ControlClient* ctl) {
  const LinkChoice c = link_choice();
  if (c == LinkChoice::kShm) return false;
  if (type == QpType::kUd) return ud_on_network(d);
  if (type != QpType::kRc && type != QpType::kUc && type != QpType::kXrcSend && type != QpType::kXrcRecv)
    return false;
  if (!av.is_global) return false;  // no GRH: a LID, which only the shared-memory link knows
  link::IpAddr dst, src;
  if (!unicast_addr(av.dgid, d, &dst)) return false;
  if (av.sgid_index >= d.num_gids || !unicast_addr(d.gids[av.sgid_index], d, &src)) return false;
  if (c == LinkChoice::kUdp || !(own_gid(d, av.dgid) || local_address(dst))) return true;
  // An address of this host: shared memory, if this user's uroced serves the
  // peer's QP. One it does not know belongs to another user's process (or to
  // a process on another daemon): that one is reached as another host would
  // be, over the network link (daemon/peer_check.h).
  if (ctl && !ctl->knows_qpn(dest_qpn)) {
    UROCE_INFO("QP %u: peer QP %u is not on this user's uroced: over the network link", qpn, dest_qpn);
    return true;
  }
  return false;
}

bool ud_dest_remote(const DeviceInfo& d, const AddressVector& av, link::IpAddr* cache_ip,
                    bool* cache_remote) {
  link::IpAddr dst;
  if (!av.is_global) return false;
  // A unicast address or a group (IPv4 only).
  if (!unicast_addr(av.dgid, d, &dst) && !(dst.is_v4() && dst.multicast())) return false;
  if (link_choice() == LinkChoice::kUdp) return true;
  if (!(dst == *cache_ip)) {
    *cache_ip = dst;
    *cache_remote = !(own_gid(d, av.dgid) || local_address(dst));
  }
  return *cache_remote;
}

}  // namespace uroce::core
