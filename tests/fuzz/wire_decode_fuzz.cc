// Fuzz target: any bytes as the UDP payload of a RoCE v2 packet. decode()
// must never crash or read outside its input; what it accepts must encode
// back to the same bytes (reserved bits and pad contents aside), and the
// ICRC must be computable over it.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "wire/icrc.h"
#include "wire/ip_udp.h"
#include "wire/packet.h"

using namespace uroce::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Packet p;
  if (decode({data, size}, &p) != DecodeError::kNone) return 0;
  std::vector<uint8_t> out(encoded_size(p) + kIcrcBytes);
  const size_t n = encode(p, out.data(), out.size());
  if (n + kIcrcBytes != size) __builtin_trap();
  const size_t hlen = header_bytes(p.bth.opcode);
  // Reserved fields the decoder ignores and the encoder writes as 0.
  std::vector<uint8_t> want(data, data + n);
  want[8] &= 0x80;  // BTH: A bit, 7 reserved bits
  size_t at = kBthBytes;
  const uint16_t hdrs = headers_of(p.bth.opcode);
  for (Hdr h : kHdrOrder) {
    if (!(hdrs & h)) continue;
    if (h == kDeth) want[at + 4] = 0;
    if (h == kXrcEth) want[at] = 0;
    at += hdr_bytes(h);
  }
  for (size_t i = hlen + p.payload.size(); i < n; ++i) want[i] = 0;  // pad bytes
  if (memcmp(want.data(), out.data(), n) != 0) __builtin_trap();
  uint8_t ip[kIpv4HeaderBytes], udp[kUdpHeaderBytes];
  build_ipv4_udp(Ipv4UdpFields{}, size, data, ip, udp);
  volatile uint32_t c = icrc(ip, udp, {data, size - kIcrcBytes});
  (void)c;
  return 0;
}
