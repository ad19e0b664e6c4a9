// The 40-byte Global Route Header a UD receive finds ahead of its payload
// (IBA Vol. 1 11.4.1.2 and Annex A17.4.5.1 for RoCE v2): over IPv6 the GRH is
// the packet's IPv6 header; over IPv4 the first 20 bytes are zero and the
// packet's IPv4 header fills the last 20.
#pragma once

#include <cstdint>

namespace uroce::wire {

constexpr uint32_t kGrhBytes = 40;

/// GRH of a RoCE v2 packet carried over IPv4 with header `ip`.
void grh_from_ipv4(const uint8_t ip[20], uint8_t grh[kGrhBytes]);

/// GRH of a RoCE v2 packet carried over IPv6 (what its IPv6 header holds);
/// `payload_len` counts the UDP header and everything after it.
void grh_ipv6(uint8_t traffic_class, uint32_t flow_label, uint16_t payload_len, uint8_t hop_limit,
              const uint8_t sgid[16], const uint8_t dgid[16], uint8_t grh[kGrhBytes]);

/// ibv_wc.sl of a UD receive on a RoCE port, as mlx5 reports it (its CQE's
/// packet-type nibble, which UCX reads to find the destination GID in `grh`):
/// bit 3 set for RoCE v2 (a UDP header followed the L3 header), bits 2:0 the
/// L3 header the GRH area holds, 2 = IPv4 (in its last 20 bytes), 1 = IPv6.
uint8_t grh_packet_type(const uint8_t grh[kGrhBytes]);

}  // namespace uroce::wire
