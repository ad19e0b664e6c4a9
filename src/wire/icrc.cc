#include "wire/icrc.h"

#include <zlib.h>

#include <cstring>

namespace uroce::wire {

uint32_t icrc(std::span<const uint8_t> ip, std::span<const uint8_t> udp, std::span<const uint8_t> ib) {
  static const uint8_t kLrh[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, kLrh, sizeof(kLrh));
  uint8_t h[40];
  const size_t ip_len = ip.size() <= sizeof(h) ? ip.size() : sizeof(h);
  memcpy(h, ip.data(), ip_len);
  if (ip_len >= 20 && (h[0] >> 4) == 4) {
    h[1] = 0xff;           // TOS (DSCP + ECN)
    h[8] = 0xff;           // TTL
    h[10] = h[11] = 0xff;  // header checksum
  } else if (ip_len >= 40 && (h[0] >> 4) == 6) {
    h[0] |= 0x0f;  // traffic class (low nibble of byte 0, high of byte 1)
    h[1] = 0xff;   // ... and the flow label
    h[2] = h[3] = 0xff;
    h[7] = 0xff;  // hop limit
  }
  crc = crc32(crc, h, uInt(ip_len));
  uint8_t u[8] = {};
  memcpy(u, udp.data(), udp.size() < 8 ? udp.size() : 8);
  u[6] = u[7] = 0xff;  // UDP checksum
  crc = crc32(crc, u, 8);
  if (ib.size() >= 5) {
    crc = crc32(crc, ib.data(), 4);
    const uint8_t resv8a = 0xff;
    crc = crc32(crc, &resv8a, 1);
    crc = crc32(crc, ib.data() + 5, uInt(ib.size() - 5));
  } else {
    crc = crc32(crc, ib.data(), uInt(ib.size()));
  }
  return uint32_t(crc);
}

}  // namespace uroce::wire
