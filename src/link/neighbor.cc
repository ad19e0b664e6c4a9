#include "link/neighbor.h"

#include <linux/neighbour.h>
#include <netinet/in.h>
#include <netlink/addr.h>
#include <netlink/netlink.h>
#include <netlink/route/neighbour.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "link/udp_link.h"  // sockaddr_of

namespace uroce::link {

namespace {

// libnl's objects, released by their own calls.
struct SockFree {
  void operator()(nl_sock* s) const { nl_socket_free(s); }
};
struct AddrPut {
  void operator()(nl_addr* a) const { nl_addr_put(a); }
};
struct CachePut {
  void operator()(nl_cache* c) const { nl_cache_free(c); }
};
struct RoutePut {
  void operator()(rtnl_route* r) const { rtnl_route_put(r); }
};
struct NeighPut {
  void operator()(rtnl_neigh* n) const { rtnl_neigh_put(n); }
};

std::unique_ptr<nl_addr, AddrPut> nl_addr_of(const IpAddr& a) {
  if (a.is_v4()) {
    const uint32_t v = a.raw4();
    return std::unique_ptr<nl_addr, AddrPut>(nl_addr_build(AF_INET, &v, 4));
  }
  return std::unique_ptr<nl_addr, AddrPut>(nl_addr_build(AF_INET6, a.b, 16));
}

// Neighbour states whose address is usable (as the kernel's own output
// path sends to: reachable, being re-checked, or configured).
constexpr int kUsable = NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT | NUD_NOARP;

}  // namespace

Result<Mac> neighbor_mac(const IpAddr& dst, uint32_t ifindex) {
  std::unique_ptr<nl_sock, SockFree> sk(nl_socket_alloc());
  if (!sk || nl_connect(sk.get(), NETLINK_ROUTE) < 0) return Status(EIO);
  auto target = nl_addr_of(dst);
  if (!target) return Status(ENOMEM);
  // The next hop: the gateway of the route to dst, or dst itself.
  auto hop = nl_addr_of(dst);
  rtnl_route* found = nullptr;
  if (rtnl_route_lookup(sk.get(), target.get(), &found) < 0 || !found) return Status(EHOSTUNREACH);
  std::unique_ptr<rtnl_route, RoutePut> route(found);
  if (rtnl_route_get_nnexthops(route.get()) < 1) return Status(EHOSTUNREACH);
  rtnl_nexthop* nh = rtnl_route_nexthop_n(route.get(), 0);
  if (!nh || uint32_t(rtnl_route_nh_get_ifindex(nh)) != ifindex) return Status(EHOSTUNREACH);
  if (nl_addr* gw = rtnl_route_nh_get_gateway(nh)) hop.reset(nl_addr_clone(gw));
  nl_cache* c = nullptr;
  if (rtnl_neigh_alloc_cache(sk.get(), &c) < 0 || !c) return Status(EIO);
  std::unique_ptr<nl_cache, CachePut> cache(c);
  std::unique_ptr<rtnl_neigh, NeighPut> n(rtnl_neigh_get(cache.get(), int(ifindex), hop.get()));
  if (!n || !(rtnl_neigh_get_state(n.get()) & kUsable)) return Status(ENOENT);
  nl_addr* ll = rtnl_neigh_get_lladdr(n.get());
  if (!ll || nl_addr_get_len(ll) != 6) return Status(ENOENT);
  Mac m;
  memcpy(m.b, nl_addr_get_binary_addr(ll), 6);
  return m;
}

Result<Mac> resolve_neighbor(const IpAddr& dst, uint32_t ifindex, int wait_ms) {
  auto m = neighbor_mac(dst, ifindex);
  if (m.is_ok() || m.err() != ENOENT) return m;
  // Anything the kernel sends towards dst makes it resolve the next hop;
  // the discard port's datagram is answered with nothing (or an ICMP port
  // unreachable), and carries nothing.
  const int s = socket(dst.is_v4() ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s >= 0) {
    const SockAddr a = sockaddr_of(UdpAddr{dst, 9});
    (void)sendto(s, "", 0, MSG_DONTWAIT, a.get(), a.len);
    close(s);
  }
  for (int i = 0; i < wait_ms; ++i) {
    usleep(1000);
    m = neighbor_mac(dst, ifindex);
    if (m.is_ok() || m.err() != ENOENT) return m;
  }
  return m;
}

}  // namespace uroce::link
