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

namespace {
/// For packets of one length: the ICRC differences the 16 bits of the IPv4
/// identification make (the CRC is linear: two packets that differ only in
/// the identification x differ in their CRC by CRC(x, zero start, no final
/// inversion) advanced over the bytes after the field, zlib's
/// crc32_combine operator), in echelon form, to solve for x: pivot bit,
/// vector, and which identification bits make it.
struct IdBasis {
  size_t after = SIZE_MAX;
  uint32_t pbit[16], pvec[16];
  uint16_t pmask[16];
  int n = 0;
};

const IdBasis& id_basis(size_t ib_len) {
  constexpr size_t kAfterId = 14 + 8;  // the rest of the IPv4 header, the UDP header
  // A few lengths at once: a flow's requests and the ACKs coming back, a
  // transfer's full packets and its last one. Building one costs ~16 zlib
  // combine operations (microseconds); using it, 16 conditional XORs.
  constexpr int kWays = 8;
  thread_local IdBasis cache[kWays];
  thread_local int victim = 0;
  const size_t after = kAfterId + ib_len;
  for (const IdBasis& c : cache)
    if (c.after == after) return c;
  IdBasis& b = cache[victim];
  victim = (victim + 1) % kWays;
  const uLong op = crc32_combine_gen(z_off_t(after));
  uint32_t bit[16];
  const uint8_t zero[2] = {0, 0};
  const uint32_t base = uint32_t(crc32(0, zero, 2));
  for (int i = 0; i < 16; ++i) {
    // Big-endian on the wire: bits 0-7 in the second byte.
    const uint8_t field[2] = {uint8_t(i >= 8 ? 1u << (i - 8) : 0), uint8_t(i < 8 ? 1u << i : 0)};
    bit[i] = uint32_t(crc32_combine_op(crc32(0, field, 2) ^ base, 0, op));
  }
  b.n = 0;
  for (int i = 0; i < 16; ++i) {
    uint32_t v = bit[i];
    uint16_t m = uint16_t(1u << i);
    for (int j = 0; j < b.n; ++j)
      if (v & b.pbit[j]) {
        v ^= b.pvec[j];
        m ^= b.pmask[j];
      }
    if (!v) continue;  // dependent (never seen for CRC-32: it catches every 16-bit burst)
    b.pbit[b.n] = v & (~v + 1);
    b.pvec[b.n] = v;
    b.pmask[b.n] = m;
    ++b.n;
  }
  b.after = after;
  return b;
}
}  // namespace

int icrc_ipv4_id_solve(uint32_t crc0, uint32_t carried, size_t ib_len) {
  uint32_t t = crc0 ^ carried;
  if (!t) return 0;
  const IdBasis& b = id_basis(ib_len);
  uint16_t x = 0;
  for (int j = 0; j < b.n; ++j)
    if (t & b.pbit[j]) {
      t ^= b.pvec[j];
      x ^= b.pmask[j];
    }
  return t ? -1 : int(x);
}

int icrc_ipv4_id(uint32_t crc0, uint32_t carried, size_t ib_len, int limit) {
  const int x = icrc_ipv4_id_solve(crc0, carried, ib_len);
  return x >= 0 && x < limit ? x : -1;
}

}  // namespace uroce::wire
