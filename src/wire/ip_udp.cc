#include "wire/ip_udp.h"

#include <cstring>

namespace uroce::wire {
namespace {

/// One's-complement sum of 16-bit big-endian words (RFC 1071), not folded.
uint32_t sum16(const uint8_t* p, size_t n, uint32_t acc) {
  for (size_t i = 0; i + 1 < n; i += 2) acc += uint32_t(p[i] << 8 | p[i + 1]);
  if (n & 1) acc += uint32_t(p[n - 1] << 8);
  return acc;
}
uint16_t fold(uint32_t acc) {
  while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
  return uint16_t(~acc);
}

/// The UDP header; with `payload`, its checksum over the pseudo-header
/// (the `addr_len` bytes of source and destination address at `addrs`,
/// protocol, UDP length: RFC 768, RFC 8200 8.1).
void udp_header(uint16_t sport, uint16_t dport, size_t udp_len, const uint8_t* payload, const uint8_t* addrs,
                size_t addr_len, uint8_t udp[8]) {
  udp[0] = uint8_t(sport >> 8);
  udp[1] = uint8_t(sport);
  udp[2] = uint8_t(dport >> 8);
  udp[3] = uint8_t(dport);
  udp[4] = uint8_t(udp_len >> 8);
  udp[5] = uint8_t(udp_len);
  udp[6] = udp[7] = 0;
  if (!payload) return;
  uint32_t acc = sum16(addrs, addr_len, 0);
  acc += 17 + uint32_t(udp_len);
  acc = sum16(udp, kUdpHeaderBytes, acc);
  acc = sum16(payload, udp_len - kUdpHeaderBytes, acc);
  uint16_t c = fold(acc);
  if (c == 0) c = 0xffff;  // 0 means "no checksum"
  udp[6] = uint8_t(c >> 8);
  udp[7] = uint8_t(c);
}

}  // namespace

void build_ipv4_udp(const Ipv4UdpFields& f, size_t payload_len, const uint8_t* payload, uint8_t ip[20],
                    uint8_t udp[8]) {
  const size_t udp_len = kUdpHeaderBytes + payload_len;
  const size_t total = kIpv4HeaderBytes + udp_len;
  memset(ip, 0, kIpv4HeaderBytes);
  ip[0] = 0x45;
  ip[1] = f.tos;
  ip[2] = uint8_t(total >> 8);
  ip[3] = uint8_t(total);
  ip[4] = uint8_t(f.id >> 8);
  ip[5] = uint8_t(f.id);
  ip[6] = f.dont_fragment ? 0x40 : 0;
  ip[8] = f.ttl;
  ip[9] = 17;  // UDP
  memcpy(ip + 12, &f.src, 4);
  memcpy(ip + 16, &f.dst, 4);
  if (f.header_checksum) {
    const uint16_t ck = fold(sum16(ip, kIpv4HeaderBytes, 0));
    ip[10] = uint8_t(ck >> 8);
    ip[11] = uint8_t(ck);
  }

  udp_header(f.sport, f.dport, udp_len, payload, ip + 12, 8, udp);
}

void build_ipv6_udp(const Ipv6UdpFields& f, size_t payload_len, const uint8_t* payload, uint8_t ip[40],
                    uint8_t udp[8]) {
  const size_t udp_len = kUdpHeaderBytes + payload_len;
  const uint32_t w0 = 6u << 28 | uint32_t(f.traffic_class) << 20 | (f.flow_label & 0xfffff);
  ip[0] = uint8_t(w0 >> 24);
  ip[1] = uint8_t(w0 >> 16);
  ip[2] = uint8_t(w0 >> 8);
  ip[3] = uint8_t(w0);
  ip[4] = uint8_t(udp_len >> 8);
  ip[5] = uint8_t(udp_len);
  ip[6] = 17;  // next header: UDP
  ip[7] = f.hop_limit;
  memcpy(ip + 8, f.src, 16);
  memcpy(ip + 24, f.dst, 16);
  udp_header(f.sport, f.dport, udp_len, payload, ip + 8, 32, udp);
}

}  // namespace uroce::wire
