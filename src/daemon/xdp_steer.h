// The XDP program of the AF_XDP link on one interface (daemon/roce_steer.bpf.c):
// loaded and attached by uroced, which holds CAP_BPF and CAP_NET_ADMIN, through
// a bpf_link, so the attachment ends with the object (or with uroced itself):
// the host's networking is never left steering frames to nobody. uroced keeps
// the map descriptors; processes get only their AF_XDP sockets (a map
// descriptor would let them steer anyone's frames).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "wire/flow_key.h"

struct bpf_object;  // libbpf

namespace uroce::daemon {

class XdpSteer {
 public:
  /// How the program runs: in the driver (native), or in the kernel's
  /// generic path after the driver built its socket buffer (skb mode). On
  /// veth both copy every frame; generic has no MTU limit and was not
  /// slower (../shared/research/afxdp.md).
  enum class Mode { kGeneric, kNative };
  static constexpr uint32_t kMaxSockets = 64;  // the program's socket map

  /// Loads the program and attaches it to interface `ifindex`. EPERM
  /// without CAP_BPF and CAP_NET_ADMIN; EBUSY if the interface already has
  /// an XDP program.
  static Result<std::unique_ptr<XdpSteer>> attach(int ifindex, Mode mode);
  ~XdpSteer();
  XdpSteer(const XdpSteer&) = delete;
  XdpSteer& operator=(const XdpSteer&) = delete;

  /// Frames for the QPs steered to `slot` go to AF_XDP socket `xsk_fd`,
  /// which must be bound to queue 0 of the interface.
  Status set_socket(uint32_t slot, int xsk_fd);
  /// The slot's QPs go back to the kernel's stack.
  void clear_socket(uint32_t slot);
  /// Frames for destination QP `qpn` go to the socket in `slot`.
  Status steer(uint32_t qpn, uint32_t slot);
  void unsteer(uint32_t qpn);
  /// A flow steering rule as the program matches it (its raw_rule).
  struct RawRule {
    wire::FlowKey val;
    wire::FlowKey mask;
    uint32_t slot = 0;
    uint32_t pad = 0;
  };
  static constexpr uint32_t kMaxRawRules = 1024;  // the program's MAX_RAW_RULES
  /// The program's rule `i` (of [0, count) in use: set_raw_count).
  Status set_raw_rule(uint32_t i, const RawRule& r);
  /// Rules [0, n) are in use: the frames they match go to their slots'
  /// sockets (the first that matches); ENOSPC beyond kMaxRawRules.
  Status set_raw_count(uint32_t n);
  /// Frames the program sent to a socket, and RoCE v2 frames it passed to
  /// the kernel for want of one (summed over CPUs).
  struct Counts {
    uint64_t steered = 0, passed = 0, raw = 0;  // raw: by a flow rule
  };
  Counts counts() const;
  int ifindex() const { return ifindex_; }

 private:
  XdpSteer() = default;
  ::bpf_object* obj_ = nullptr;
  int link_fd_ = -1;
  int xsks_fd_ = -1, qps_fd_ = -1, counts_fd_ = -1, raw_rules_fd_ = -1, raw_count_fd_ = -1;
  int ifindex_ = 0;
};

}  // namespace uroce::daemon
