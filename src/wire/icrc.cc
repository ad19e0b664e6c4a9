#include "wire/icrc.h"

#ifdef UROCE_HAVE_ISAL
#include <isa-l/crc.h>
#endif
#include <zlib.h>

#include <atomic>
#include <cstring>

#include "wire/ip_udp.h"
#include "wire/opcodes.h"

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

/// The CRC over the 8 bytes of 0xFF standing in for the LRH and the IP and
/// UDP headers with their variant fields masked: the state a packet's own
/// bytes continue from.
uint32_t header_crc(std::span<const uint8_t> ip, std::span<const uint8_t> udp) {
  uint8_t h[8 + 40 + 8];
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
  return crc32_more(0, h, n);
}

/// The CRC continued from `state` over `ib` with the BTH's resv8a byte
/// masked: a small packet in one CRC call (each call has a fixed cost that
/// dominates below a few hundred bytes), a large one in two.
uint32_t crc_ib(uint32_t state, std::span<const uint8_t> ib) {
  constexpr size_t kInline = 192;
  uint8_t h[kInline];
  const size_t head = ib.size() <= kInline ? ib.size() : 12;  // all of a small packet, else the BTH
  memcpy(h, ib.data(), head);
  if (head >= 5) h[4] = 0xff;  // BTH resv8a
  uint32_t crc = crc32_more(state, h, head);
  if (head < ib.size()) crc = crc32_more(crc, ib.data() + head, ib.size() - head);
  return crc;
}

}  // namespace

uint32_t icrc(std::span<const uint8_t> ip, std::span<const uint8_t> udp, std::span<const uint8_t> ib) {
  return crc_ib(header_crc(ip, udp), ib);
}

/// For packets of one length: the ICRC differences the 16 bits of the IPv4
/// identification make (the CRC is linear: two packets that differ only in
/// the identification x differ in their CRC by CRC(x, zero start, no final
/// inversion) advanced over the bytes after the field, zlib's
/// crc32_combine operator): `bit`, and in echelon form, to solve for x:
/// pivot bit, vector, and which identification bits make it.
struct Ipv4Icrc::IdBasis {
  uint32_t bit[16];
  uint32_t pbit[16], pvec[16];
  uint16_t pmask[16];
  int n = 0;
};

namespace {

using IdBasis = Ipv4Icrc::IdBasis;

void build_basis(size_t ib_len, IdBasis* b) {
  constexpr size_t kAfterId = 14 + 8;  // the rest of the IPv4 header, the UDP header
  const uLong op = crc32_combine_gen(z_off_t(kAfterId + ib_len));
  const uint8_t zero[2] = {0, 0};
  const uint32_t base = uint32_t(crc32(0, zero, 2));
  for (int i = 0; i < 16; ++i) {
    // Big-endian on the wire: bits 0-7 in the second byte.
    const uint8_t field[2] = {uint8_t(i >= 8 ? 1u << (i - 8) : 0), uint8_t(i < 8 ? 1u << i : 0)};
    b->bit[i] = uint32_t(crc32_combine_op(crc32(0, field, 2) ^ base, 0, op));
  }
  b->n = 0;
  for (int i = 0; i < 16; ++i) {
    uint32_t v = b->bit[i];
    uint16_t m = uint16_t(1u << i);
    for (int j = 0; j < b->n; ++j)
      if (v & b->pbit[j]) {
        v ^= b->pvec[j];
        m ^= b->pmask[j];
      }
    if (!v) continue;  // dependent (never seen for CRC-32: it catches every 16-bit burst)
    b->pbit[b->n] = v & (~v + 1);
    b->pvec[b->n] = v;
    b->pmask[b->n] = m;
    ++b->n;
  }
}

// Every packet a path MTU allows (BTH, extended headers, 4096 bytes of
// payload, pad) is shorter than this.
constexpr size_t kKnownLengths = 4096 + 256;

/// The basis for packets of `ib_len` (< kKnownLengths) bytes: built once per
/// length for the process (~16 zlib combine operations, microseconds), then
/// read without locks.
const IdBasis& basis_for(size_t ib_len) {
  static std::atomic<const IdBasis*> known[kKnownLengths];
  if (const IdBasis* b = known[ib_len].load(std::memory_order_acquire)) return *b;
  auto* b = new IdBasis();  // lives for the process
  build_basis(ib_len, b);
  const IdBasis* expected = nullptr;
  if (known[ib_len].compare_exchange_strong(expected, b, std::memory_order_acq_rel)) return *b;
  delete b;  // another thread was first
  return *expected;
}

/// The identification whose ICRC difference is `t`, or -1. Branch-free:
/// the bits of t are data (mispredicted branches cost more than the XORs).
int reduce(const IdBasis& b, uint32_t t) {
  uint32_t x = 0;
  for (int j = 0; j < b.n; ++j) {
    const uint32_t take = 0u - uint32_t((t & b.pbit[j]) != 0);
    t ^= b.pvec[j] & take;
    x ^= b.pmask[j] & take;
  }
  return t ? -1 : int(x);
}

}  // namespace

Ipv4Icrc::Entry& Ipv4Icrc::entry(const Flow& f, size_t ib_len) {
  for (Entry& e : e_)
    if (e.ib_len == ib_len && e.f.src == f.src && e.f.dst == f.dst && e.f.sport == f.sport &&
        e.f.dport == f.dport)
      return e;
  Entry& e = e_[victim_];
  victim_ = (victim_ + 1) % (sizeof(e_) / sizeof(e_[0]));
  // The headers in front of the BTH, identification 0.
  uint8_t ip[20], udp[8];
  Ipv4UdpFields fields;
  fields.src = f.src;
  fields.dst = f.dst;
  fields.sport = f.sport;
  fields.dport = f.dport;
  fields.header_checksum = false;
  build_ipv4_udp(fields, ib_len + kIcrcBytes, nullptr, ip, udp);
  e.f = f;
  e.ib_len = ib_len;
  e.state = header_crc(ip, udp);
  e.basis = nullptr;
  return e;
}

const Ipv4Icrc::IdBasis& Ipv4Icrc::basis(Entry& e, IdBasis* spare) {
  if (e.basis) return *e.basis;
  if (e.ib_len < kKnownLengths) return *(e.basis = &basis_for(e.ib_len));
  build_basis(e.ib_len, spare);  // no real packet is this long: not worth keeping
  return *spare;
}

uint32_t Ipv4Icrc::compute(const Flow& f, uint16_t id, std::span<const uint8_t> ib) {
  Entry& e = entry(f, ib.size());
  uint32_t crc = crc_ib(e.state, ib);
  if (!id) return crc;
  IdBasis spare;
  const IdBasis& b = basis(e, &spare);
  for (int i = 0; i < 16; ++i) crc ^= b.bit[i] & (0u - ((uint32_t(id) >> i) & 1u));
  return crc;
}

int Ipv4Icrc::solve(const Flow& f, std::span<const uint8_t> ib, uint32_t carried) {
  Entry& e = entry(f, ib.size());
  const uint32_t t = crc_ib(e.state, ib) ^ carried;
  if (!t) return 0;
  IdBasis spare;
  return reduce(basis(e, &spare), t);
}

}  // namespace uroce::wire
