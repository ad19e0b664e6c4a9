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

}  // namespace uroce::wire
