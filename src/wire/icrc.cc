#include "wire/icrc.h"

#ifdef UROCE_HAVE_ISAL
#include <isa-l/crc.h>
#else
#include <zlib.h>
#endif

#include <cstring>

namespace uroce::wire {

namespace {
/// CRC-32 (IEEE 802.3, reflected; zlib's crc32) continued over `len` bytes.
/// ISA-L's folds with carry-less multiplication (PCLMULQDQ), several times
/// zlib's speed on packet payloads; zlib is the fallback when it is missing.
inline uint32_t crc32_more(uint32_t crc, const uint8_t* p, size_t len) {
#ifdef UROCE_HAVE_ISAL
  return crc32_gzip_refl(crc, p, len);
#else
  return uint32_t(crc32(crc, p, uInt(len)));
#endif
}
}  // namespace

uint32_t icrc(std::span<const uint8_t> ip, std::span<const uint8_t> udp, std::span<const uint8_t> ib) {
  static const uint8_t kLrh[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  uint32_t crc = crc32_more(0, kLrh, sizeof(kLrh));
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
  crc = crc32_more(crc, h, ip_len);
  uint8_t u[8] = {};
  memcpy(u, udp.data(), udp.size() < 8 ? udp.size() : 8);
  u[6] = u[7] = 0xff;  // UDP checksum
  crc = crc32_more(crc, u, 8);
  if (ib.size() >= 5) {
    crc = crc32_more(crc, ib.data(), 4);
    const uint8_t resv8a = 0xff;
    crc = crc32_more(crc, &resv8a, 1);
    crc = crc32_more(crc, ib.data() + 5, ib.size() - 5);
  } else {
    crc = crc32_more(crc, ib.data(), ib.size());
  }
  return crc;
}

}  // namespace uroce::wire
