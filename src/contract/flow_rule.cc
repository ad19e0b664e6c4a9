#include "contract/flow_rule.h"

#include <cstring>

namespace uroce::core {

uint32_t rss_hash(const wire::FlowKey& k, uint64_t fields, const uint8_t* key, size_t key_len) {
  uint8_t in[36];
  size_t n = 0;
  auto put = [&](const void* p, size_t len) {
    std::memcpy(in + n, p, len);
    n += len;
  };
  if (k.layers & wire::kLayerIpv4) {
    if (fields & kRssSrcIpv4) put(&k.src_ip4, 4);
    if (fields & kRssDstIpv4) put(&k.dst_ip4, 4);
  } else if (k.layers & wire::kLayerIpv6) {
    if (fields & kRssSrcIpv6) put(k.src_ip6, 16);
    if (fields & kRssDstIpv6) put(k.dst_ip6, 16);
  }
  const bool tcp = k.layers & wire::kLayerTcp, udp = k.layers & wire::kLayerUdp;
  if ((tcp && (fields & kRssSrcPortTcp)) || (udp && (fields & kRssSrcPortUdp))) put(&k.src_port, 2);
  if ((tcp && (fields & kRssDstPortTcp)) || (udp && (fields & kRssDstPortUdp))) put(&k.dst_port, 2);
  // For each set bit of the input (most significant first), XOR in the 32
  // bits of the key that start at that bit.
  uint32_t h = 0;
  for (size_t i = 0; i < n; ++i)
    for (int b = 0; b < 8; ++b) {
      if (!(in[i] & (0x80 >> b))) continue;
      const size_t bit = i * 8 + size_t(b);
      uint32_t window = 0;
      for (size_t j = 0; j < 32; ++j) {
        const size_t kb = bit + j;
        const bool set = kb / 8 < key_len && (key[kb / 8] & (0x80 >> (kb % 8)));
        window = (window << 1) | (set ? 1 : 0);
      }
      h ^= window;
    }
  return h;
}

}  // namespace uroce::core
