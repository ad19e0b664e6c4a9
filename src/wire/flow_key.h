// What a flow steering rule (ibv_create_flow(3)) matches in an Ethernet
// frame: the fields of its L2, L3 and L4 headers laid out in one fixed key,
// so that a rule is a value and a mask over that key and a match is a
// masked compare of nine 64-bit words — the same compare in the library
// (frames a raw QP sends to this host's other QPs, and frames its AF_XDP
// socket receives) and in uroced's XDP program, which keeps every frame no
// rule claims for the kernel.
//
// Every field is in network byte order, as the verbs' flow specs carry it;
// `layers` says which headers the frame has, and a spec for a header asks
// for it by masking those bits (an IPV4 spec matches IPv4 frames only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace uroce::wire {

struct alignas(8) FlowKey {
  uint8_t dst_mac[6];
  uint8_t src_mac[6];
  uint16_t ether_type;  // after the last VLAN tag
  uint16_t vlan_tag;    // the outer tag's TCI (0 without one)
  uint32_t src_ip4, dst_ip4;
  uint8_t proto;      // IPv4 protocol / IPv6 next header
  uint8_t tos;        // IPv4 TOS / IPv6 traffic class
  uint8_t ttl;        // IPv4 TTL / IPv6 hop limit
  uint8_t ip4_flags;  // kIp4DontFrag | kIp4MoreFrag
  uint32_t flow_label;
  uint16_t src_port, dst_port;
  uint32_t layers;  // FlowLayer bits (host order)
  uint8_t src_ip6[16];
  uint8_t dst_ip6[16];
};
static_assert(sizeof(FlowKey) == 72 && sizeof(FlowKey) % 8 == 0, "nine words, no padding");

/// The headers a frame has (FlowKey::layers).
enum FlowLayer : uint32_t {
  kLayerIpv4 = 1u << 0,
  kLayerIpv6 = 1u << 1,
  kLayerTcp = 1u << 2,
  kLayerUdp = 1u << 3,
  kLayerVlan = 1u << 4,
  kLayerMulticast = 1u << 5,  // the destination MAC's group bit
  kLayerL3 = kLayerIpv4 | kLayerIpv6,
  kLayerL4 = kLayerTcp | kLayerUdp,
};

/// ibv_flow_ipv4_ext_filter::flags, as the kernel's IB_IPV4_DONT_FRAG and
/// IB_IPV4_MORE_FRAG.
constexpr uint8_t kIp4DontFrag = 0x2;
constexpr uint8_t kIp4MoreFrag = 0x4;

/// The key of an Ethernet frame (without FCS). Headers cut short count as
/// absent; a fragment other than the first has no L4.
FlowKey flow_key_of(std::span<const uint8_t> frame);

/// Whether `k` matches the rule value `val` under `mask` (`val` holds only
/// masked bits).
inline bool flow_matches(const FlowKey& k, const FlowKey& val, const FlowKey& mask) {
  uint64_t diff = 0;
  for (size_t i = 0; i < sizeof(FlowKey); i += 8) {
    uint64_t a, v, m;
    std::memcpy(&a, reinterpret_cast<const uint8_t*>(&k) + i, 8);
    std::memcpy(&v, reinterpret_cast<const uint8_t*>(&val) + i, 8);
    std::memcpy(&m, reinterpret_cast<const uint8_t*>(&mask) + i, 8);
    diff |= (a & m) ^ v;
  }
  return diff == 0;
}

}  // namespace uroce::wire
