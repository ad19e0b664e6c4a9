#include "wire/flow_key.h"

#include <arpa/inet.h>

namespace uroce::wire {

namespace {

constexpr uint16_t kEthIpv4 = 0x0800, kEthIpv6 = 0x86dd, kEthVlan = 0x8100, kEthQinQ = 0x88a8;
constexpr uint8_t kProtoTcp = 6, kProtoUdp = 17;

uint16_t be16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }

}  // namespace

FlowKey flow_key_of(std::span<const uint8_t> f) {
  FlowKey k{};
  if (f.size() < 14) return k;
  std::memcpy(k.dst_mac, f.data(), 6);
  std::memcpy(k.src_mac, f.data() + 6, 6);
  if (k.dst_mac[0] & 1) k.layers |= kLayerMulticast;
  size_t off = 12;
  uint16_t type = be16(f.data() + off);
  // Up to two tags (802.1Q, 802.1ad): the rule's VLAN is the outer one.
  for (int tags = 0; tags < 2 && (type == kEthVlan || type == kEthQinQ) && f.size() >= off + 6; ++tags) {
    if (tags == 0) {
      std::memcpy(&k.vlan_tag, f.data() + off + 2, 2);
      k.layers |= kLayerVlan;
    }
    off += 4;
    type = be16(f.data() + off);
  }
  k.ether_type = htons(type);
  off += 2;
  const uint8_t* p = f.data() + off;
  const size_t left = f.size() - off;
  size_t l4 = 0;
  bool has_l4 = false;
  if (type == kEthIpv4 && left >= 20 && (p[0] >> 4) == 4 && (p[0] & 0xf) >= 5) {
    k.layers |= kLayerIpv4;
    k.tos = p[1];
    const uint16_t frag = be16(p + 6);
    k.ip4_flags = uint8_t((frag & 0x4000 ? kIp4DontFrag : 0) | (frag & 0x2000 ? kIp4MoreFrag : 0));
    k.ttl = p[8];
    k.proto = p[9];
    std::memcpy(&k.src_ip4, p + 12, 4);
    std::memcpy(&k.dst_ip4, p + 16, 4);
    l4 = size_t(p[0] & 0xf) * 4;
    has_l4 = (frag & 0x1fff) == 0;  // a later fragment has no L4 header
  } else if (type == kEthIpv6 && left >= 40 && (p[0] >> 4) == 6) {
    k.layers |= kLayerIpv6;
    const uint32_t w0 = uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
    k.tos = uint8_t(w0 >> 20);
    k.flow_label = htonl(w0 & 0xfffff);
    k.proto = p[6];
    k.ttl = p[7];
    std::memcpy(k.src_ip6, p + 8, 16);
    std::memcpy(k.dst_ip6, p + 24, 16);
    l4 = 40;
    has_l4 = true;
  }
  if (has_l4 && left >= l4 + 4 && (k.proto == kProtoTcp || k.proto == kProtoUdp)) {
    k.layers |= k.proto == kProtoTcp ? kLayerTcp : kLayerUdp;
    std::memcpy(&k.src_port, p + l4, 2);
    std::memcpy(&k.dst_port, p + l4 + 2, 2);
  }
  return k;
}

}  // namespace uroce::wire
