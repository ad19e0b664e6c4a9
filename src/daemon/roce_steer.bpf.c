// The XDP program uroced attaches to an interface the AF_XDP link uses
// (daemon/xdp_steer.h): a frame one of the flow steering rules in
// `raw_rules` matches (a process's RAW_PACKET QPs: ibv_create_flow), and a
// RoCE v2 frame (IPv4 or IPv6, UDP destination port 4791) whose BTH names a
// destination QP that `qp_socks` maps, go to that entry's AF_XDP socket in
// `xsks`; every other frame goes on to the kernel's stack (XDP_PASS), so
// the host's own traffic, and the RoCE traffic of the processes still on
// UDP sockets, is untouched.
//
// Built with clang -target bpf at build time and embedded in uroced.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define ROCE_V2_PORT 4791
#define BTH_BYTES 12
#define MAX_RAW_RULES 1024

// What a rule matches: the same layout, field for field, as wire::FlowKey
// (src/wire/flow_key.h; daemon/xdp_steer.cc checks the size and offsets).
struct flow_key {
  __u8 dst_mac[6];
  __u8 src_mac[6];
  __u16 ether_type;
  __u16 vlan_tag;
  __u32 src_ip4, dst_ip4;
  __u8 proto, tos, ttl, ip4_flags;
  __u32 flow_label;
  __u16 src_port, dst_port;
  __u32 layers;
  __u8 src_ip6[16];
  __u8 dst_ip6[16];
} __attribute__((aligned(8)));

#define LAYER_IPV4 (1u << 0)
#define LAYER_IPV6 (1u << 1)
#define LAYER_TCP (1u << 2)
#define LAYER_UDP (1u << 3)
#define LAYER_VLAN (1u << 4)
#define LAYER_MULTICAST (1u << 5)

struct raw_rule {
  struct flow_key val;   // only masked bits set
  struct flow_key mask;
  __u32 slot;            // the socket in `xsks`
  __u32 pad;
};

// The rules, [0, raw_count[0]) in use (uroced keeps them packed).
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, MAX_RAW_RULES);
  __type(key, __u32);
  __type(value, struct raw_rule);
} raw_rules SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u32);
} raw_count SEC(".maps");

// AF_XDP sockets by slot (uroced fills it; the slots are its own numbering).
struct {
  __uint(type, BPF_MAP_TYPE_XSKMAP);
  __uint(max_entries, 64);
  __type(key, __u32);
  __type(value, __u32);
} xsks SEC(".maps");

// Destination QP number -> slot in `xsks`.
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32);
  __type(value, __u32);
} qp_socks SEC(".maps");

// Frames steered, RoCE v2 frames passed to the kernel (no socket for their
// QP), and frames a flow rule steered.
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 3);
  __type(key, __u32);
  __type(value, __u64);
} counts SEC(".maps");

static __always_inline void count(__u32 which) {
  __u64* c = bpf_map_lookup_elem(&counts, &which);
  if (c) *c += 1;
}

// The key of the frame [data, end), as wire::flow_key_of builds it.
static __always_inline void key_of(void* data, void* end, struct flow_key* k) {
  __u8* p = data;
  if ((void*)(p + 14) > end) return;
  __builtin_memcpy(k->dst_mac, p, 6);
  __builtin_memcpy(k->src_mac, p + 6, 6);
  if (p[0] & 1) k->layers |= LAYER_MULTICAST;
  __u16 type = (__u16)(p[12] << 8 | p[13]);
  p += 14;
  // Up to two tags (802.1Q, 802.1ad): the rule's VLAN is the outer one.
  if (type == 0x8100 || type == 0x88a8) {
    if ((void*)(p + 4) > end) return;
    __builtin_memcpy(&k->vlan_tag, p, 2);
    k->layers |= LAYER_VLAN;
    type = (__u16)(p[2] << 8 | p[3]);
    p += 4;
    if (type == 0x8100 || type == 0x88a8) {
      if ((void*)(p + 4) > end) return;
      type = (__u16)(p[2] << 8 | p[3]);
      p += 4;
    }
  }
  k->ether_type = bpf_htons(type);
  __u8* l4 = 0;
  if (type == ETH_P_IP) {
    if ((void*)(p + 20) > end || (p[0] >> 4) != 4 || (p[0] & 0xf) < 5) return;
    k->layers |= LAYER_IPV4;
    k->tos = p[1];
    const __u16 frag = (__u16)(p[6] << 8 | p[7]);
    k->ip4_flags = (frag & 0x4000 ? 0x2 : 0) | (frag & 0x2000 ? 0x4 : 0);
    k->ttl = p[8];
    k->proto = p[9];
    __builtin_memcpy(&k->src_ip4, p + 12, 4);
    __builtin_memcpy(&k->dst_ip4, p + 16, 4);
    if ((frag & 0x1fff) == 0) l4 = p + (p[0] & 0xf) * 4;
  } else if (type == ETH_P_IPV6) {
    if ((void*)(p + 40) > end || (p[0] >> 4) != 6) return;
    k->layers |= LAYER_IPV6;
    const __u32 w0 = (__u32)p[0] << 24 | (__u32)p[1] << 16 | (__u32)p[2] << 8 | p[3];
    k->tos = (__u8)(w0 >> 20);
    k->flow_label = bpf_htonl(w0 & 0xfffff);
    k->proto = p[6];
    k->ttl = p[7];
    __builtin_memcpy(k->src_ip6, p + 8, 16);
    __builtin_memcpy(k->dst_ip6, p + 24, 16);
    l4 = p + 40;
  }
  if (l4 && (void*)(l4 + 4) <= end && (k->proto == IPPROTO_TCP || k->proto == IPPROTO_UDP)) {
    k->layers |= k->proto == IPPROTO_TCP ? LAYER_TCP : LAYER_UDP;
    __builtin_memcpy(&k->src_port, l4, 2);
    __builtin_memcpy(&k->dst_port, l4 + 2, 2);
  }
}

// The socket slot of the first rule that matches the frame, or -1.
static __always_inline int raw_slot(void* data, void* end) {
  __u32 zero = 0;
  const __u32* n = bpf_map_lookup_elem(&raw_count, &zero);
  if (!n || *n == 0) return -1;
  struct flow_key k = {};
  key_of(data, end, &k);
  const __u64* kw = (const __u64*)&k;
  for (__u32 i = 0; i < MAX_RAW_RULES; ++i) {
    if (i >= *n) break;
    const struct raw_rule* r = bpf_map_lookup_elem(&raw_rules, &i);
    if (!r) break;
    const __u64* v = (const __u64*)&r->val;
    const __u64* m = (const __u64*)&r->mask;
    __u64 diff = 0;
#pragma unroll
    for (int w = 0; w < (int)(sizeof(struct flow_key) / 8); ++w) diff |= (kw[w] & m[w]) ^ v[w];
    if (!diff) return (int)r->slot;
  }
  return -1;
}

SEC("xdp")
int roce_steer(struct xdp_md* ctx) {
  void* data = (void*)(long)ctx->data;
  void* end = (void*)(long)ctx->data_end;
  const int raw = raw_slot(data, end);
  if (raw >= 0) {
    const long verdict = bpf_redirect_map(&xsks, (__u32)raw, XDP_PASS);
    if (verdict == XDP_REDIRECT) count(2);
    return verdict;
  }
  struct ethhdr* eth = data;
  if ((void*)(eth + 1) > end) return XDP_PASS;
  struct udphdr* udp;
  if (eth->h_proto == bpf_htons(ETH_P_IP)) {
    struct iphdr* ip = (void*)(eth + 1);
    if ((void*)(ip + 1) > end || ip->protocol != IPPROTO_UDP || ip->ihl < 5) return XDP_PASS;
    // A fragment is the kernel's to reassemble (RoCE v2 never sends one).
    if (ip->frag_off & bpf_htons(0x3fff)) return XDP_PASS;
    udp = (void*)ip + ip->ihl * 4;
  } else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
    struct ipv6hdr* ip6 = (void*)(eth + 1);
    if ((void*)(ip6 + 1) > end || ip6->nexthdr != IPPROTO_UDP) return XDP_PASS;
    udp = (void*)(ip6 + 1);
  } else {
    return XDP_PASS;
  }
  if ((void*)(udp + 1) > end || udp->dest != bpf_htons(ROCE_V2_PORT)) return XDP_PASS;
  const __u8* bth = (const __u8*)(udp + 1);
  if ((void*)(bth + BTH_BYTES) > end) return XDP_PASS;
  // IBA 9.2: the destination QP is BTH bytes 5..7 (big-endian).
  const __u32 qpn = ((__u32)bth[5] << 16) | ((__u32)bth[6] << 8) | bth[7];
  const __u32* slot = bpf_map_lookup_elem(&qp_socks, &qpn);
  if (!slot) {
    count(1);
    return XDP_PASS;
  }
  // No socket in the slot (its process is gone): the kernel's stack, as
  // for a QP nobody steered.
  const long verdict = bpf_redirect_map(&xsks, *slot, XDP_PASS);
  count(verdict == XDP_REDIRECT ? 0 : 1);
  return verdict;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
