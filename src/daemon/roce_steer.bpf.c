// The XDP program uroced attaches to an interface the AF_XDP link uses
// (link/xdp_program.h): a RoCE v2 frame (IPv4 or IPv6, UDP destination port
// 4791) whose BTH names a destination QP that `qp_socks` maps goes to that
// entry's AF_XDP socket in `xsks`; every other frame goes on to the kernel's
// stack (XDP_PASS), so the host's own traffic, and the RoCE traffic of the
// processes still on UDP sockets, is untouched.
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

// Frames steered, and RoCE v2 frames passed to the kernel (no socket for their QP).
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2);
  __type(key, __u32);
  __type(value, __u64);
} counts SEC(".maps");

static __always_inline void count(__u32 which) {
  __u64* c = bpf_map_lookup_elem(&counts, &which);
  if (c) *c += 1;
}

SEC("xdp")
int roce_steer(struct xdp_md* ctx) {
  void* data = (void*)(long)ctx->data;
  void* end = (void*)(long)ctx->data_end;
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
