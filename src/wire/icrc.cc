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
  // The masked headers and the start of the packet go into one buffer, so a
  // small packet is one CRC call and a large one two (each call has a fixed
  // cost that dominates below a few hundred bytes).
  constexpr size_t kInline = 192;
  uint8_t h[8 + 40 + 8 + kInline];
  memset(h, 0xff, 8);  // stands in for the LRH
  size_t n = 8;
  const size_t ip_len = ip.size() <= 40 ? ip.size() : 40;
  uint8_t* iph = h + n;
  memcpy(iph, ip.data(), ip_len);
  if (ip_len >= 20 && (iph[0] >> 4) == 4) {
    iph[1] = 0xff;             // TOS (DSCP + ECN)
    iph[8] = 0xff;             // TTL
    iph[10] = iph[11] = 0xff;  // header checksum
  } else if (ip_len >= 40 && (iph[0] >> 4) == 6) {
    iph[0] |= 0x0f;  // traffic class (low nibble of byte 0, high of byte 1)
    iph[1] = 0xff;   // ... and the flow label
    iph[2] = iph[3] = 0xff;
    iph[7] = 0xff;  // hop limit
  }
  n += ip_len;
  uint8_t* u = h + n;
  memset(u, 0, 8);
  memcpy(u, udp.data(), udp.size() < 8 ? udp.size() : 8);
  u[6] = u[7] = 0xff;  // UDP checksum
  n += 8;
  const size_t head = ib.size() <= kInline ? ib.size() : 12;  // all of a small packet, else the BTH
  memcpy(h + n, ib.data(), head);
  if (head >= 5) h[n + 4] = 0xff;  // BTH resv8a
  n += head;
  uint32_t crc = crc32_more(0, h, n);
  if (head < ib.size()) crc = crc32_more(crc, ib.data() + head, ib.size() - head);
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
