// The Ethernet address a frame to an IP address goes to, from the kernel's
// own tables (libnl): the route to the address gives the next hop (the
// address itself on a directly connected network, else the gateway), the
// neighbour table that hop's MAC. What the AF_XDP link writes as a frame's
// destination: the kernel's ARP / neighbour discovery stays the one
// source, as it is for the UDP-socket link.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "link/ip_addr.h"

namespace uroce::link {

struct Mac {
  uint8_t b[6] = {};
};

/// The MAC of the next hop towards `dst` through interface `ifindex`.
/// ENOENT: the kernel does not know it yet; EHOSTUNREACH: no route, or one
/// through another interface.
Result<Mac> neighbor_mac(const IpAddr& dst, uint32_t ifindex);

/// neighbor_mac, and when the kernel does not know the neighbour yet, a
/// datagram to `dst`'s discard port (9) to make the kernel resolve it, then
/// looks again every millisecond for at most `wait_ms`.
Result<Mac> resolve_neighbor(const IpAddr& dst, uint32_t ifindex, int wait_ms);

}  // namespace uroce::link
