// An IP address of the network link, held as a RoCE v2 GID holds it.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace uroce::link {

/// An IP address as a RoCE v2 GID holds it: IPv6, or IPv4 mapped
/// (::ffff:a.b.c.d). A link-local IPv6 address also needs its interface.
struct IpAddr {
  uint8_t b[16] = {};
  uint32_t scope = 0;  // IPv6 link-local (fe80::/10): the interface index

  IpAddr() = default;  // (not an aggregate: UdpAddr{uint32_t, port} must not compile)

  static IpAddr v4(uint32_t ip) {  // network order (as in in_addr.s_addr)
    IpAddr a;
    a.b[10] = a.b[11] = 0xff;
    memcpy(a.b + 12, &ip, 4);
    return a;
  }
  /// From a GID; `ifindex` is kept for a link-local one.
  static IpAddr of_gid(const uint8_t gid[16], uint32_t ifindex) {
    IpAddr a;
    memcpy(a.b, gid, 16);
    if (a.link_local()) a.scope = ifindex;
    return a;
  }
  bool is_v4() const {
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(b, kMapped, 12) == 0;
  }
  /// IPv4, network order (0 for IPv6).
  uint32_t ip4() const {
    uint32_t v = 0;
    if (is_v4()) memcpy(&v, b + 12, 4);
    return v;
  }
  /// The IPv4 address of an address known to be IPv4 (no check).
  uint32_t raw4() const {
    uint32_t v;
    memcpy(&v, b + 12, 4);
    return v;
  }
  bool link_local() const { return b[0] == 0xfe && (b[1] & 0xc0) == 0x80; }
  /// A multicast group: 224.0.0.0/4, or ff00::/8.
  bool multicast() const { return is_v4() ? (b[12] & 0xf0) == 0xe0 : b[0] == 0xff; }
  /// Unset, or a wildcard (:: or 0.0.0.0).
  bool empty() const {
    static constexpr uint8_t kZero[16] = {};
    return memcmp(b, kZero, 16) == 0 || (is_v4() && ip4() == 0);
  }
  bool operator==(const IpAddr& o) const { return memcmp(b, o.b, 16) == 0 && scope == o.scope; }
};

/// "192.0.2.1", "fd00::1", "fe80::1%2".
std::string to_string(const IpAddr& a);

}  // namespace uroce::link
