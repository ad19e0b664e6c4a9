// ibv_create_flow / ibv_destroy_flow (the verbs_context slots: verbs.h
// calls them inline, so programs never import them). The flow attribute
// and its specs are checked as libibverbs' command and the kernel's uverbs
// check them (the same errno for the same mistake), then folded into one
// value and mask over wire::FlowKey (contract/flow_rule.h).
#include <arpa/inet.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "verbs/objects.h"

namespace uroce::verbs {

namespace {

/// The kernel's IB_FLOW_SPEC_SUPPORT_LAYERS.
constexpr uint8_t kMaxSpecs = 10;
/// What the flags of a flow attribute may hold (the kernel's
/// IB_FLOW_ATTR_FLAGS_RESERVED; bit 0 is deprecated and refused too).
constexpr uint32_t kFlagsKnown = IBV_FLOW_ATTR_FLAGS_DONT_TRAP | IBV_FLOW_ATTR_FLAGS_EGRESS;

struct UFlow {
  ibv_flow flow;
  uint64_t handle;
  UQp* qp;
};

void set_bytes(uint8_t* val, uint8_t* mask, const uint8_t* v, const uint8_t* m, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    mask[i] |= m[i];
    val[i] = uint8_t((val[i] & ~m[i]) | (v[i] & m[i]));
  }
}

template <typename T>
void set_field(T* val, T* mask, T v, T m) {
  set_bytes(reinterpret_cast<uint8_t*>(val), reinterpret_cast<uint8_t*>(mask),
            reinterpret_cast<const uint8_t*>(&v), reinterpret_cast<const uint8_t*>(&m), sizeof(T));
}

/// The spec asks for a header: the frame must have it.
void need_layer(core::FlowRule* r, uint32_t group, uint32_t which) {
  r->mask.layers |= group;
  r->val.layers = (r->val.layers & ~group) | which;
}

bool all_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

/// The filter of a spec whose size libibverbs reads from the spec (IPV4_EXT,
/// IPV6): `known` bytes of value then `known` of mask are uroce's; a longer
/// filter's extra mask must be zero (EOPNOTSUPP), a shorter one is EINVAL.
int sized_filter(const uint8_t* spec, size_t spec_size, size_t known, size_t min, uint8_t* val,
                 uint8_t* mask) {
  constexpr size_t kHdr = offsetof(ibv_flow_spec_ipv4_ext, val);
  if (spec_size < kHdr) return EINVAL;
  const size_t half = (spec_size - kHdr) / 2;
  if (half < min) return EINVAL;
  const uint8_t* v = spec + kHdr;
  const uint8_t* m = spec + kHdr + half;
  if (half > known && !all_zero(m + known, half - known)) return EOPNOTSUPP;
  const size_t n = half < known ? half : known;
  std::memset(val, 0, known);
  std::memset(mask, 0, known);
  std::memcpy(val, v, n);
  std::memcpy(mask, m, n);
  return 0;
}

/// One spec into the rule; errno or 0. *size: the spec's bytes.
int add_spec(const uint8_t* p, size_t left, core::FlowRule* r, size_t* size) {
  if (left < offsetof(ibv_flow_spec_eth, val)) return EINVAL;
  uint32_t type;
  uint16_t sz;
  std::memcpy(&type, p, 4);
  std::memcpy(&sz, p + 4, 2);
  if (sz < offsetof(ibv_flow_spec_eth, val) || sz > left) return EINVAL;
  *size = sz;
  wire::FlowKey& v = r->val;
  wire::FlowKey& m = r->mask;
  switch (type) {
    case IBV_FLOW_SPEC_ETH: {
      if (sz < sizeof(ibv_flow_spec_eth)) return EINVAL;
      ibv_flow_spec_eth s;
      std::memcpy(&s, p, sizeof(s));
      set_bytes(v.dst_mac, m.dst_mac, s.val.dst_mac, s.mask.dst_mac, 6);
      set_bytes(v.src_mac, m.src_mac, s.val.src_mac, s.mask.src_mac, 6);
      set_field(&v.ether_type, &m.ether_type, s.val.ether_type, s.mask.ether_type);
      set_field(&v.vlan_tag, &m.vlan_tag, s.val.vlan_tag, s.mask.vlan_tag);
      if (s.mask.vlan_tag) need_layer(r, wire::kLayerVlan, wire::kLayerVlan);
      return 0;
    }
    case IBV_FLOW_SPEC_IPV4: {
      if (sz < sizeof(ibv_flow_spec_ipv4)) return EINVAL;
      ibv_flow_spec_ipv4 s;
      std::memcpy(&s, p, sizeof(s));
      set_field(&v.src_ip4, &m.src_ip4, s.val.src_ip, s.mask.src_ip);
      set_field(&v.dst_ip4, &m.dst_ip4, s.val.dst_ip, s.mask.dst_ip);
      need_layer(r, wire::kLayerL3, wire::kLayerIpv4);
      return 0;
    }
    case IBV_FLOW_SPEC_IPV4_EXT: {
      ibv_flow_ipv4_ext_filter fv, fm;
      const int e = sized_filter(p, sz, sizeof(fv), offsetof(ibv_flow_ipv4_ext_filter, flags) + 1,
                                 reinterpret_cast<uint8_t*>(&fv), reinterpret_cast<uint8_t*>(&fm));
      if (e) return e;
      set_field(&v.src_ip4, &m.src_ip4, fv.src_ip, fm.src_ip);
      set_field(&v.dst_ip4, &m.dst_ip4, fv.dst_ip, fm.dst_ip);
      set_field(&v.proto, &m.proto, fv.proto, fm.proto);
      set_field(&v.tos, &m.tos, fv.tos, fm.tos);
      set_field(&v.ttl, &m.ttl, fv.ttl, fm.ttl);
      set_field(&v.ip4_flags, &m.ip4_flags, fv.flags, fm.flags);
      need_layer(r, wire::kLayerL3, wire::kLayerIpv4);
      return 0;
    }
    case IBV_FLOW_SPEC_IPV6: {
      ibv_flow_ipv6_filter fv, fm;
      const int e = sized_filter(p, sz, sizeof(fv), offsetof(ibv_flow_ipv6_filter, hop_limit) + 1,
                                 reinterpret_cast<uint8_t*>(&fv), reinterpret_cast<uint8_t*>(&fm));
      if (e) return e;
      // A flow label has 20 bits.
      if (ntohl(fm.flow_label) > 0xfffff || ntohl(fv.flow_label) > 0xfffff) return EINVAL;
      set_bytes(v.src_ip6, m.src_ip6, fv.src_ip, fm.src_ip, 16);
      set_bytes(v.dst_ip6, m.dst_ip6, fv.dst_ip, fm.dst_ip, 16);
      set_field(&v.flow_label, &m.flow_label, fv.flow_label, fm.flow_label);
      set_field(&v.proto, &m.proto, fv.next_hdr, fm.next_hdr);
      set_field(&v.tos, &m.tos, fv.traffic_class, fm.traffic_class);
      set_field(&v.ttl, &m.ttl, fv.hop_limit, fm.hop_limit);
      need_layer(r, wire::kLayerL3, wire::kLayerIpv6);
      return 0;
    }
    case IBV_FLOW_SPEC_TCP:
    case IBV_FLOW_SPEC_UDP: {
      if (sz < sizeof(ibv_flow_spec_tcp_udp)) return EINVAL;
      ibv_flow_spec_tcp_udp s;
      std::memcpy(&s, p, sizeof(s));
      set_field(&v.src_port, &m.src_port, s.val.src_port, s.mask.src_port);
      set_field(&v.dst_port, &m.dst_port, s.val.dst_port, s.mask.dst_port);
      need_layer(r, wire::kLayerL4, type == IBV_FLOW_SPEC_TCP ? wire::kLayerTcp : wire::kLayerUdp);
      return 0;
    }
    case IBV_FLOW_SPEC_ESP:
    case IBV_FLOW_SPEC_VXLAN_TUNNEL:
    case IBV_FLOW_SPEC_GRE:
    case IBV_FLOW_SPEC_MPLS:
    case IBV_FLOW_SPEC_ACTION_TAG:
    case IBV_FLOW_SPEC_ACTION_DROP:
    case IBV_FLOW_SPEC_ACTION_HANDLE:
    case IBV_FLOW_SPEC_ACTION_COUNT:
      return EOPNOTSUPP;  // specs of the verbs that steering here does not do
    default:
      return EINVAL;  // inner headers too (IBV_FLOW_SPEC_INNER): no tunnels here
  }
}

}  // namespace

/// Checks `a` and its specs; 0 and the rule, or an errno.
int parse_flow_attr(const ibv_flow_attr* a, core::FlowRule* r) {
  *r = core::FlowRule{};
  if (a->comp_mask) return EINVAL;
  if (a->flags & ~kFlagsKnown) return EINVAL;
  if (a->type > IBV_FLOW_ATTR_SNIFFER) return EINVAL;
  const bool dont_trap = a->flags & IBV_FLOW_ATTR_FLAGS_DONT_TRAP;
  // DONT_TRAP only for a NORMAL rule (the kernel: not with ALL_DEFAULT or
  // MC_DEFAULT; mlx5: nor with SNIFFER).
  if (dont_trap && a->type != IBV_FLOW_ATTR_NORMAL) return EINVAL;
  if (a->num_of_specs > kMaxSpecs) return EINVAL;
  if (a->port != 1) return EINVAL;
  // Egress rules only find the device for a flow action: none here.
  if (a->flags & IBV_FLOW_ATTR_FLAGS_EGRESS) return EOPNOTSUPP;
  if (a->type != IBV_FLOW_ATTR_NORMAL && a->num_of_specs)
    return EINVAL;  // default and sniffer rules take no specs
  // The specs follow; each says its own size. (libibverbs builds the
  // kernel's command from the specs and never reads attr->size.)
  const auto* p = reinterpret_cast<const uint8_t*>(a + 1);
  size_t left = SIZE_MAX / 2;
  for (uint8_t i = 0; i < a->num_of_specs; ++i) {
    size_t sz = 0;
    if (int e = add_spec(p, left, r, &sz)) return e;
    p += sz;
    left -= sz;
  }
  r->type = core::FlowType(a->type);
  r->dont_trap = dont_trap;
  r->priority = a->priority;
  return 0;
}

ibv_flow* op_create_flow(ibv_qp* qp, ibv_flow_attr* attr) {
  core::FlowRule r;
  if (int e = parse_flow_attr(attr, &r)) {
    errno = e;
    return nullptr;
  }
  UQp* q = uqp(qp);
  auto h = q->core->create_flow(r);
  if (!h.is_ok()) {
    errno = h.err();
    return nullptr;
  }
  auto* f = new UFlow{};
  f->flow.context = qp->context;
  f->flow.handle = uint32_t(h.value());
  f->handle = h.value();
  f->qp = q;
  return &f->flow;
}

int op_destroy_flow(ibv_flow* flow) {
  auto* f = reinterpret_cast<UFlow*>(flow);
  Status st = f->qp->core->destroy_flow(f->handle);
  delete f;
  return st.err();
}

}  // namespace uroce::verbs
