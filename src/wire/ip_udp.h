// The IPv4 or IPv6 and UDP headers in front of a RoCE v2 packet, as the kernel
// writes them for a datagram socket. The ICRC covers them (wire/icrc.h), so
// the sender builds the same bytes to compute it, and captures (pcap) need
// them for whole frames.
#pragma once

#include <cstddef>
#include <cstdint>

namespace uroce::wire {

constexpr uint16_t kRoceV2Port = 4791;
constexpr size_t kIpv4HeaderBytes = 20;
constexpr size_t kIpv6HeaderBytes = 40;
constexpr size_t kUdpHeaderBytes = 8;
/// The ECN field: the low two bits of the IPv4 TOS / IPv6 traffic class
/// (RFC 3168). Senders mark ECT(0); a queue that fills rewrites it to CE.
constexpr uint8_t kEcnMask = 0x3;
constexpr uint8_t kEcnEct0 = 0x2;
constexpr uint8_t kEcnCe = 0x3;

struct Ipv4UdpFields {
  uint32_t src = 0, dst = 0;  // network order (as in in_addr.s_addr)
  uint16_t sport = 0, dport = kRoceV2Port;
  uint16_t id = 0;   // Linux sends 0 on a socket with IP_PMTUDISC_DO that is not connected
  uint8_t tos = 0;   // DSCP + ECN (outside the ICRC)
  uint8_t ttl = 64;  // (outside the ICRC)
  bool dont_fragment = true;
  /// Fill in the IPv4 header checksum (the ICRC masks it: computing an ICRC
  /// needs none; a capture does).
  bool header_checksum = true;
};

/// Writes the 20-byte IPv4 header (header checksum filled in) and the 8-byte
/// UDP header for a UDP payload of `payload_len` bytes. With `payload`, the
/// UDP checksum is computed too; without it, it is 0 ("none", legal over IPv4).
void build_ipv4_udp(const Ipv4UdpFields& f, size_t payload_len, const uint8_t* payload, uint8_t ip[20],
                    uint8_t udp[8]);

struct Ipv6UdpFields {
  uint8_t src[16] = {}, dst[16] = {};
  uint16_t sport = 0, dport = kRoceV2Port;
  uint8_t traffic_class = 0;  // (outside the ICRC)
  uint32_t flow_label = 0;    // (outside the ICRC)
  uint8_t hop_limit = 64;     // (outside the ICRC)
};

/// Writes the 40-byte IPv6 header and the 8-byte UDP header for a UDP
/// payload of `payload_len` bytes. With `payload`, the UDP checksum is
/// computed too (IPv6 requires it: what a capture needs); without it, it is 0
/// (the ICRC masks it).
void build_ipv6_udp(const Ipv6UdpFields& f, size_t payload_len, const uint8_t* payload, uint8_t ip[40],
                    uint8_t udp[8]);

}  // namespace uroce::wire
