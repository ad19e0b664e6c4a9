// Flow steering rules of a QP (ibv_create_flow(3)): the process's raw
// switch (net/raw_switch.h) holds them; the QP checks who may make them.
#include <cstring>

#include "common/log.h"
#include "contract/limits.h"
#include "core/qp.h"
#include "link/xdp_link.h"
#include "net/net_engine.h"
#include "net/raw_switch.h"

namespace uroce::core {

Result<uint64_t> Qp::create_flow(const FlowRule& r) {
  // The kernel's uverbs: UD or RAW_PACKET QPs only (EINVAL), and CAP_NET_RAW
  // for every rule (EPERM). uroce steers frames to RAW_PACKET QPs only.
  if (type_ == QpType::kUd) return Status(EOPNOTSUPP);
  if (type_ != QpType::kRawPacket) return Status(EINVAL);
  if (!ctx_->ctl()) return Status(EPERM);
  // uroced checks CAP_NET_RAW with each rule it puts on the wire (wire_rule);
  // a rule that stays in this process (no port here, a sniffer) is asked
  // about here.
  link::XdpPort* port = wire_port();
  const bool checked_by_rule = r.type != FlowType::kSniffer && port != nullptr;
  if (Status st = checked_by_rule ? Status::ok() : ctx_->ctl()->raw_access(); !st.is_ok()) {
    UROCE_WARN("flow steering rule refused: %s",
               st.err() == EPERM ? "the process lacks CAP_NET_RAW" : strerror(st.err()));
    return st;
  }
  auto h = RawSwitch::get().add(ctx_->dev().ifindex, qpn_, r, rss_.get());
  if (!h.is_ok()) return h;
  if (Status st = wire_rule(port, h.value(), &r); !st.is_ok()) {
    RawSwitch::get().remove(h.value());
    if (st.err() == EPERM) UROCE_WARN("flow steering rule refused: the process lacks CAP_NET_RAW");
    return st;
  }
  return h;
}

Status Qp::destroy_flow(uint64_t handle) {
  if (!RawSwitch::get().remove(handle)) return Status(EINVAL);
  return wire_rule(wire_port(), handle, nullptr);
}

link::XdpPort* Qp::wire_port() const { return NetEngine::get().xdp_port(ctx_->dev(), ctx_->ctl()); }

Status Qp::wire_rule(link::XdpPort* port, uint64_t handle, const FlowRule* r) {
  // A sniffer sees what this process's raw QPs and AF_XDP socket move; it
  // takes nothing from the kernel.
  if (r && r->type == FlowType::kSniffer) return Status::ok();
  if (!port) return Status::ok();  // nothing comes from the wire to this process
  wire::FlowKey val{}, mask{};
  if (r && r->type == FlowType::kMcDefault) {
    mask.layers = val.layers = wire::kLayerMulticast;
  } else if (r && r->type == FlowType::kNormal) {
    val = r->val;
    mask = r->mask;
  }  // ALL_DEFAULT: everything
  Status st = ctx_->ctl()->raw_rule(ctx_->dev().ifindex, handle, val, mask, r != nullptr);
  return r || st.err() != ENOENT ? st : Status::ok();
}

Status Qp::set_rate_limit(uint32_t kbps, uint32_t max_burst_bytes) {
  if (!raw_engine_) return Status(EINVAL);
  if (kbps && (kbps < kLimits.qp_rate_limit_min_kbps || kbps > kLimits.qp_rate_limit_max_kbps))
    return Status(EINVAL);
  raw_engine_->set_rate(kbps, max_burst_bytes);
  return Status::ok();
}

// A RAW_PACKET QP's multicast group (perftest's --raw_mcast, as mlx5 takes
// it): the MGID's last six bytes are the group's MAC, and attaching is a
// NORMAL rule on that destination MAC.
Status Qp::raw_attach(const uint8_t gid[16]) {
  const uint8_t* mac = gid + 10;
  if (!(mac[0] & 1)) return Status(EINVAL);  // not a group address
  for (const RawGroup& r : raw_groups_)
    if (std::memcmp(r.mac, mac, 6) == 0) return Status::ok();
  auto h = RawSwitch::get().add_mac(ctx_->dev().ifindex, qpn_, mac);
  if (!h.is_ok()) return Status(h.err());
  FlowRule rule;
  std::memcpy(rule.val.dst_mac, mac, 6);
  std::memset(rule.mask.dst_mac, 0xff, 6);
  if (Status st = wire_rule(wire_port(), h.value(), &rule); !st.is_ok()) {
    RawSwitch::get().remove(h.value());
    return st;
  }
  RawGroup r{};
  std::memcpy(r.mac, mac, 6);
  r.handle = h.value();
  raw_groups_.push_back(r);
  return Status::ok();
}

Status Qp::raw_detach(const uint8_t gid[16]) {
  for (auto it = raw_groups_.begin(); it != raw_groups_.end(); ++it)
    if (std::memcmp(it->mac, gid + 10, 6) == 0) {
      RawSwitch::get().remove(it->handle);
      (void)wire_rule(wire_port(), it->handle, nullptr);
      raw_groups_.erase(it);
      return Status::ok();
    }
  return Status(EINVAL);
}

bool Qp::has_flows() const { return type_ == QpType::kRawPacket && RawSwitch::get().rules_of(qpn_) != 0; }

}  // namespace uroce::core
