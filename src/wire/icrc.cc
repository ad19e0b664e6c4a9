#include "wire/icrc.h"

#ifdef UROCE_HAVE_ISAL
#include <isa-l/crc.h>
#endif
#include <zlib.h>

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

int icrc_ipv4_id(uint32_t crc0, uint32_t carried, size_t ib_len, int limit) {
  if (crc0 == carried) return 0;
  if (limit > 64) limit = 64;
  // Two packets that differ only in the identification x: their CRCs differ
  // by CRC(x, with zero start and no final inversion) advanced over the
  // bytes after the field (zlib's crc32_combine operator), linear in x. One
  // vector per bit of x, for the last length seen (a flow's packets are
  // mostly one size).
  constexpr size_t kAfterId = 14 + 8;  // the rest of the IPv4 header, the UDP header
  struct Basis {
    size_t len = SIZE_MAX;
    uint32_t bit[6];
  };
  thread_local Basis b;
  const size_t after = kAfterId + ib_len;
  if (b.len != after) {
    const uLong op = crc32_combine_gen(z_off_t(after));
    const uint8_t zero[2] = {0, 0};
    const uint32_t base = uint32_t(crc32(0, zero, 2));
    for (int i = 0; i < 6; ++i) {
      const uint8_t field[2] = {0, uint8_t(1u << i)};  // big-endian: low bits in the second byte
      b.bit[i] = uint32_t(crc32_combine_op(crc32(0, field, 2) ^ base, 0, op));
    }
    b.len = after;
  }
  // Every x below the next power of two in Gray-code order: one XOR per step.
  const uint32_t want = crc0 ^ carried;
  int span = 1;
  while (span < limit) span <<= 1;
  uint32_t d = 0;
  for (int k = 1; k < span; ++k) {
    d ^= b.bit[__builtin_ctz(unsigned(k))];
    const int x = k ^ (k >> 1);
    if (d == want && x < limit) return x;
  }
  return -1;
}

}  // namespace uroce::wire
