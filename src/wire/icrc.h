// The RoCE v2 invariant CRC (IBTA Vol. 1 Annex A17.3.3): CRC-32 (zlib's)
// over 8 bytes of 0xFF standing in for the LRH, the IP header and the UDP
// header with their variant fields set to all ones (IPv4: TOS, TTL, header
// checksum; IPv6: traffic class, flow label, hop limit; UDP: checksum), the
// BTH with its resv8a byte set to all ones, and the rest of the packet up to
// the ICRC. On the wire the value goes least-significant byte first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace uroce::wire {

/// `ip`: the 20-byte IPv4 header (no options) or the 40-byte IPv6 header;
/// `udp`: 8 bytes; `ib`: BTH up to, not including, the ICRC.
uint32_t icrc(std::span<const uint8_t> ip, std::span<const uint8_t> udp, std::span<const uint8_t> ib);

/// ICRCs of RoCE v2 packets over IPv4 computed per flow: for a few recent
/// (addresses, ports, length) keys it keeps the CRC state after the
/// pseudo-LRH and the masked IPv4 (identification 0) and UDP headers, so a
/// packet costs one CRC pass over its own bytes, and the identification
/// enters through the CRC's linearity (no header is built). Same results as
/// icrc() over headers from build_ipv4_udp (don't fragment, no options).
/// One per user: not thread-safe.
class Ipv4Icrc {
 public:
  struct Flow {
    uint32_t src = 0, dst = 0;  // network order (as in in_addr.s_addr)
    uint16_t sport = 0, dport = 0;
  };
  /// The ICRC of `ib` (BTH up to, not including, the ICRC) sent on `f` with identification `id`.
  uint32_t compute(const Flow& f, uint16_t id, std::span<const uint8_t> ib);
  /// The identification (0-65535) with which `ib` on `f` has the ICRC
  /// `carried`, or -1. A datagram socket does not see the IP header, and a
  /// connected socket's datagrams carry a per-socket counter that starts
  /// anywhere (docs/network-link.md). The CRC is linear, so the ICRC of
  /// identification x differs from identification 0's by a value that
  /// depends only on x and the packet's length: 16 XORs against a reduced
  /// basis, no second pass over the packet. Accepting every value lets a
  /// corrupted packet pass with a 1 / 2^16 chance: the caller narrows it
  /// (link/udp_ip_id.cc).
  int solve(const Flow& f, std::span<const uint8_t> ib, uint32_t carried);

  /// (Internal) the identification's effect on the ICRC for one length.
  struct IdBasis;

 private:
  struct Entry {
    Flow f;
    size_t ib_len = SIZE_MAX;
    uint32_t state = 0;              // the CRC after the 36 bytes in front of the BTH
    const IdBasis* basis = nullptr;  // this length's, once needed
  };
  Entry& entry(const Flow& f, size_t ib_len);
  /// e's length's basis (kept in e; beyond any real packet's length built into `spare`).
  static const IdBasis& basis(Entry& e, IdBasis* spare);
  Entry e_[4];
  unsigned victim_ = 0;
};

/// Stores the ICRC as the wire carries it (little-endian) / reads it back.
inline void put_icrc(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
  p[2] = uint8_t(v >> 16);
  p[3] = uint8_t(v >> 24);
}
inline uint32_t get_icrc(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

}  // namespace uroce::wire
