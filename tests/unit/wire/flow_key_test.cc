// The key a flow steering rule matches (wire/flow_key.h), and the Toeplitz
// hash RSS picks a work queue with (contract/flow_rule.h), against the
// verification vectors Microsoft publishes with its RSS specification.
#include "wire/flow_key.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "contract/flow_rule.h"

namespace uroce::wire {
namespace {

std::vector<uint8_t> eth(uint16_t type, std::vector<uint8_t> rest, bool vlan = false) {
  std::vector<uint8_t> f = {0x01, 0x00, 0x5e, 0x01, 0x02, 0x03, 0x02, 0, 0, 0, 0, 9};
  if (vlan) f.insert(f.end(), {0x81, 0x00, 0x20, 0x05});  // PCP 1, VLAN 5
  f.push_back(uint8_t(type >> 8));
  f.push_back(uint8_t(type));
  f.insert(f.end(), rest.begin(), rest.end());
  return f;
}

std::vector<uint8_t> ipv4_udp(uint16_t frag = 0x4000) {
  std::vector<uint8_t> ip = {0x45, 0xb8, 0,  28, 0, 0, uint8_t(frag >> 8), uint8_t(frag), 33, 17, 0, 0, 10, 0,
                             0,    2,    10, 0,  0, 1};
  ip.insert(ip.end(), {0x12, 0x34, 0x13, 0x89, 0, 8, 0, 0});
  return ip;
}

TEST(FlowKey, Ipv4UdpBehindAVlanTag) {
  const FlowKey k = flow_key_of(eth(0x0800, ipv4_udp(), true));
  EXPECT_EQ(k.layers, kLayerIpv4 | kLayerUdp | kLayerVlan | kLayerMulticast);
  EXPECT_EQ(ntohs(k.ether_type), 0x0800) << "the type after the tag";
  EXPECT_EQ(ntohs(k.vlan_tag), 0x2005);
  EXPECT_EQ(ntohl(k.src_ip4), 0x0a000002u);
  EXPECT_EQ(ntohl(k.dst_ip4), 0x0a000001u);
  EXPECT_EQ(k.tos, 0xb8);
  EXPECT_EQ(k.ttl, 33);
  EXPECT_EQ(k.proto, 17);
  EXPECT_EQ(k.ip4_flags, kIp4DontFrag);
  EXPECT_EQ(ntohs(k.src_port), 0x1234);
  EXPECT_EQ(ntohs(k.dst_port), 5001);
}

TEST(FlowKey, ALaterFragmentHasNoPortsAndAShortFrameNoHeaders) {
  const FlowKey frag = flow_key_of(eth(0x0800, ipv4_udp(0x2010)));
  EXPECT_EQ(frag.layers & kLayerL4, 0u);
  EXPECT_EQ(frag.ip4_flags, kIp4MoreFrag);
  std::vector<uint8_t> cut = eth(0x0800, ipv4_udp());
  cut.resize(14 + 19);
  EXPECT_EQ(flow_key_of(cut).layers & (kLayerL3 | kLayerL4), 0u);
  EXPECT_EQ(flow_key_of(std::vector<uint8_t>(13, 0)).layers, 0u);
}

TEST(FlowKey, Ipv6Tcp) {
  std::vector<uint8_t> ip6(40, 0);
  ip6[0] = 0x6a;  // traffic class 0xa3, flow label 0x12345
  ip6[1] = 0x31;
  ip6[2] = 0x23;
  ip6[3] = 0x45;
  ip6[6] = 6;
  ip6[7] = 9;
  ip6[8] = 0xfe;
  ip6[39] = 1;
  ip6.insert(ip6.end(), {0, 80, 0x1f, 0x90, 0, 0, 0, 0});
  const FlowKey k = flow_key_of(eth(0x86dd, ip6));
  EXPECT_EQ(k.layers & ~kLayerMulticast, kLayerIpv6 | kLayerTcp);
  EXPECT_EQ(k.tos, 0xa3);
  EXPECT_EQ(ntohl(k.flow_label), 0x12345u);
  EXPECT_EQ(k.proto, 6);
  EXPECT_EQ(k.ttl, 9);
  EXPECT_EQ(k.src_ip6[0], 0xfe);
  EXPECT_EQ(k.dst_ip6[15], 1);
  EXPECT_EQ(ntohs(k.src_port), 80);
  EXPECT_EQ(ntohs(k.dst_port), 8080);
}

TEST(FlowKey, AMaskedCompareMatchesOnlyTheMaskedBits) {
  const FlowKey k = flow_key_of(eth(0x0800, ipv4_udp()));
  FlowKey val{}, mask{};
  mask.dst_port = 0xffff;
  val.dst_port = htons(5001);
  mask.layers = kLayerL4;
  val.layers = kLayerUdp;
  EXPECT_TRUE(flow_matches(k, val, mask));
  val.layers = kLayerTcp;
  EXPECT_FALSE(flow_matches(k, val, mask)) << "a TCP rule does not take UDP";
  val.layers = kLayerUdp;
  val.dst_port = htons(5002);
  EXPECT_FALSE(flow_matches(k, val, mask));
  EXPECT_TRUE(flow_matches(k, FlowKey{}, FlowKey{})) << "an empty rule matches anything";
}

// Microsoft's "Verifying the RSS Hash Calculation" vectors.
TEST(RssHash, ToeplitzMatchesTheSpecificationsVectors) {
  const uint8_t key[40] = {0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
                           0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
                           0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};
  FlowKey k{};
  k.layers = kLayerIpv4 | kLayerTcp;
  k.src_ip4 = htonl((66u << 24) | (9u << 16) | (149u << 8) | 187u);
  k.dst_ip4 = htonl((161u << 24) | (142u << 16) | (100u << 8) | 80u);
  k.src_port = htons(2794);
  k.dst_port = htons(1766);
  using namespace core;
  EXPECT_EQ(rss_hash(k, kRssSrcIpv4 | kRssDstIpv4, key, 40), 0x323e8fc2u);
  EXPECT_EQ(rss_hash(k, kRssSrcIpv4 | kRssDstIpv4 | kRssSrcPortTcp | kRssDstPortTcp, key, 40), 0x51ccc178u);
  k.src_ip4 = htonl((199u << 24) | (92u << 16) | (111u << 8) | 2u);
  k.dst_ip4 = htonl((65u << 24) | (69u << 16) | (140u << 8) | 83u);
  k.src_port = htons(14230);
  k.dst_port = htons(4739);
  EXPECT_EQ(rss_hash(k, kRssSrcIpv4 | kRssDstIpv4, key, 40), 0xd718262au);
  EXPECT_EQ(rss_hash(k, kRssSrcIpv4 | kRssDstIpv4 | kRssSrcPortTcp | kRssDstPortTcp, key, 40), 0xc626b0eau);
}

}  // namespace
}  // namespace uroce::wire
