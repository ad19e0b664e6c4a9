#include "wire/grh.h"

#include <cstring>

namespace uroce::wire {

void grh_from_ipv4(const uint8_t ip[20], uint8_t grh[kGrhBytes]) {
  memset(grh, 0, 20);
  memcpy(grh + 20, ip, 20);
}

void grh_ipv6(uint8_t traffic_class, uint32_t flow_label, uint16_t payload_len, uint8_t hop_limit,
              const uint8_t sgid[16], const uint8_t dgid[16], uint8_t grh[kGrhBytes]) {
  const uint32_t w0 = (6u << 28) | (uint32_t(traffic_class) << 20) | (flow_label & 0xfffff);
  grh[0] = uint8_t(w0 >> 24);
  grh[1] = uint8_t(w0 >> 16);
  grh[2] = uint8_t(w0 >> 8);
  grh[3] = uint8_t(w0);
  grh[4] = uint8_t(payload_len >> 8);
  grh[5] = uint8_t(payload_len);
  grh[6] = 17;  // next header: UDP
  grh[7] = hop_limit;
  memcpy(grh + 8, sgid, 16);
  memcpy(grh + 24, dgid, 16);
}

}  // namespace uroce::wire
