// A marking switch port for bench/incast.py --ecn: a tc (clsact egress)
// program on the shaped port that sets ECN Congestion Experienced on an
// ECN-capable IPv4 packet when a phantom queue -- a virtual FIFO that every
// packet to the port enters and that drains at RATE_BPS bytes per second --
// holds more than DEPTH_BYTES (HULL's phantom queue, Alizadeh et al.,
// NSDI'12; DCQCN's switches mark at a queue threshold the same way). With a
// rate a little below the port's real one, it marks before the real queue
// builds. This kernel has no qdisc that marks (no RED, fq_codel or codel),
// and nftables' byte limit holds a second of traffic before it triggers.
//
// Built by incast.py with clang -target bpf -DRATE_BPS=... -DDEPTH_BYTES=...
// and attached with tc; its counters are read back through its map.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#ifndef RATE_BPS
#error "RATE_BPS (bytes per second) is required"
#endif
#ifndef DEPTH_BYTES
#error "DEPTH_BYTES is required"
#endif

struct phantom {
  struct bpf_spin_lock lock;
  __u64 queued;   // bytes in the phantom queue at `at`
  __u64 at;       // ns
  __u64 marked;   // packets set to CE
  __u64 packets;  // packets seen
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct phantom);
} phantom_queue SEC(".maps");

SEC("tc")
int mark(struct __sk_buff* skb) {
  __u32 key = 0;
  struct phantom* q = bpf_map_lookup_elem(&phantom_queue, &key);
  if (!q) return TC_ACT_OK;
  const __u64 now = bpf_ktime_get_ns();
  bpf_spin_lock(&q->lock);
  __u64 dt = now > q->at ? now - q->at : 0;
  if (dt > 1000000000ull) dt = 1000000000ull;
  const __u64 drained = dt * RATE_BPS / 1000000000ull;
  q->queued = q->queued > drained ? q->queued - drained : 0;
  q->queued += skb->len;
  q->at = now;
  const int over = q->queued > DEPTH_BYTES;
  q->packets++;
  bpf_spin_unlock(&q->lock);
  // Only ECN-capable packets are marked (the helper checks); the others
  // are left to the real queue's drops.
  if (over && skb->protocol == bpf_htons(ETH_P_IP) && bpf_skb_ecn_set_ce(skb))
    __sync_fetch_and_add(&q->marked, 1);
  return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
