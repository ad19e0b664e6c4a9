#include "wire/grh.h"

#include <cstring>

#include "wire/ip_udp.h"

namespace uroce::wire {

void grh_from_ipv4(const uint8_t ip[20], uint8_t grh[kGrhBytes]) {
  memset(grh, 0, 20);
  memcpy(grh + 20, ip, 20);
}

void grh_ipv6(uint8_t traffic_class, uint32_t flow_label, uint16_t payload_len, uint8_t hop_limit,
              const uint8_t sgid[16], const uint8_t dgid[16], uint8_t grh[kGrhBytes]) {
  Ipv6UdpFields f;
  memcpy(f.src, sgid, 16);
  memcpy(f.dst, dgid, 16);
  f.traffic_class = traffic_class;
  f.flow_label = flow_label;
  f.hop_limit = hop_limit;
  uint8_t udp[kUdpHeaderBytes];
  build_ipv6_udp(f, payload_len - kUdpHeaderBytes, nullptr, grh, udp);
}

uint8_t grh_packet_type(const uint8_t grh[kGrhBytes]) {
  constexpr uint8_t kUdp = 0x8, kIpv6 = 0x1, kIpv4 = 0x2;
  // An IPv6 header starts with version 6; over IPv4 the first 20 bytes are zero.
  return kUdp | ((grh[0] >> 4) == 6 ? kIpv6 : kIpv4);
}

}  // namespace uroce::wire
