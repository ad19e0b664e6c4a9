#include "daemon/netdev.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netpacket/packet.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace uroce::daemon {
namespace {

struct Iface {
  std::string name;
  unsigned flags = 0;
  uint8_t mac[6] = {};
  std::vector<in_addr> v4;
  std::vector<in6_addr> v6;
};

bool link_local(const in6_addr& a) { return a.s6_addr[0] == 0xfe && (a.s6_addr[1] & 0xc0) == 0x80; }

/// An address other hosts can reach: IPv4, or IPv6 beyond the link-local one.
bool has_address(const Iface& i) {
  if (!i.v4.empty()) return true;
  for (const in6_addr& a : i.v6)
    if (!link_local(a)) return true;
  return false;
}

void add_gid(core::DeviceInfo* d, const uint8_t gid[16]) {
  if (d->num_gids >= core::kMaxGids) return;
  memcpy(d->gids[d->num_gids], gid, 16);
  // RoCE v2 only, as rxe: every entry is routable over UDP.
  d->gid_types[d->num_gids] = uint32_t(core::GidType::kRoceV2);
  d->num_gids++;
}

std::set<std::string> wanted_names() {
  std::set<std::string> out;
  const char* s = getenv("UROCE_NETDEVS");
  if (!s) return out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.insert(item);
  return out;
}

}  // namespace

std::vector<core::DeviceInfo> discover_devices() {
  ifaddrs* ifa = nullptr;
  std::vector<core::DeviceInfo> out;
  if (getifaddrs(&ifa) != 0) return out;
  std::map<std::string, Iface> ifs;
  std::vector<std::string> order;
  for (ifaddrs* p = ifa; p; p = p->ifa_next) {
    if (!p->ifa_name) continue;
    auto [it, fresh] = ifs.try_emplace(p->ifa_name);
    if (fresh) order.push_back(p->ifa_name);
    Iface& i = it->second;
    i.name = p->ifa_name;
    i.flags = p->ifa_flags;
    if (!p->ifa_addr) continue;
    switch (p->ifa_addr->sa_family) {
      case AF_INET:
        i.v4.push_back(reinterpret_cast<sockaddr_in*>(p->ifa_addr)->sin_addr);
        break;
      case AF_INET6:
        i.v6.push_back(reinterpret_cast<sockaddr_in6*>(p->ifa_addr)->sin6_addr);
        break;
      case AF_PACKET: {
        auto* ll = reinterpret_cast<sockaddr_ll*>(p->ifa_addr);
        if (ll->sll_halen == 6) memcpy(i.mac, ll->sll_addr, 6);
        break;
      }
      default:
        break;
    }
  }
  freeifaddrs(ifa);

  const std::set<std::string> wanted = wanted_names();
  int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  // Loopback last: a machine with a real interface lists that one first, as rxe users expect.
  std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    return !(ifs[a].flags & IFF_LOOPBACK) && (ifs[b].flags & IFF_LOOPBACK);
  });
  for (const std::string& name : order) {
    const Iface& i = ifs[name];
    if (wanted.empty()) {
      if (!(i.flags & IFF_UP) || !has_address(i)) continue;
    } else if (!wanted.count(name)) {
      continue;
    }
    if (out.size() >= core::kMaxDevices) break;
    core::DeviceInfo d{};
    snprintf(d.name, sizeof(d.name), "uroce_%s", name.c_str());
    snprintf(d.ifname, sizeof(d.ifname), "%s", name.c_str());
    d.ifindex = if_nametoindex(name.c_str());
    d.is_loopback = (i.flags & IFF_LOOPBACK) ? 1 : 0;
    memcpy(d.mac, i.mac, 6);
    ifreq ifr{};
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name.c_str());
    d.if_mtu = (sock >= 0 && ioctl(sock, SIOCGIFMTU, &ifr) == 0) ? uint32_t(ifr.ifr_mtu) : 1500;
    // EUI-64 from the MAC: node GUID and the link-local default GID (GID[0]).
    uint8_t eui[8] = {uint8_t(i.mac[0] ^ 2), i.mac[1], i.mac[2], 0xff, 0xfe, i.mac[3], i.mac[4], i.mac[5]};
    memcpy(&d.node_guid, eui, 8);
    uint8_t gid[16] = {0xfe, 0x80};
    memcpy(gid + 8, eui, 8);
    add_gid(&d, gid);
    // IPv4-mapped GIDs next (GID[1] is the first IPv4 address, as on rxe).
    for (const in_addr& a : i.v4) {
      uint8_t g[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
      memcpy(g + 12, &a, 4);
      add_gid(&d, g);
    }
    for (const in6_addr& a : i.v6) {
      if (link_local(a)) continue;  // GID[0]
      add_gid(&d, a.s6_addr);
    }
    out.push_back(d);
  }
  if (sock >= 0) close(sock);
  return out;
}

}  // namespace uroce::daemon
