// uroced's side of the AF_XDP link (docs/afxdp-link.md): per interface, the
// XDP program (daemon/xdp_steer.h) and the one AF_XDP socket its queue 0
// can have, lent to one client process at a time. The client binds the
// socket (it needs no privilege for that) and says so; uroced then puts its
// own copy of the descriptor in the program's socket map and steers the QP
// numbers the client asks for (the caller checks they are the client's).
// The client's end (its connection closing) clears its QPs and its slot
// and detaches the program: the interface is the kernel's again, and the
// next client may take it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "common/status.h"
#include "daemon/xdp_steer.h"

namespace uroce::daemon {

class XdpPorts {
 public:
  explicit XdpPorts(XdpSteer::Mode mode = XdpSteer::Mode::kGeneric) : mode_(mode) {}
  ~XdpPorts();
  XdpPorts(const XdpPorts&) = delete;
  XdpPorts& operator=(const XdpPorts&) = delete;

  /// A new AF_XDP socket for queue 0 of interface `ifindex`, lent to
  /// `client`: the descriptor to pass (the caller closes it once passed).
  /// EBUSY: another client has the interface (or another program is on
  /// it); EPERM: uroced lacks CAP_NET_RAW, CAP_NET_ADMIN or CAP_BPF (said in
  /// the log once).
  Result<int> open(int client, uint32_t ifindex);
  /// The client bound its socket: frames for its steered QPs go to it now.
  Status ready(int client, uint32_t ifindex);
  /// Frames for QP `qpn` go to the client's socket (`on`) or back to the
  /// kernel. Only the interface's client; `qpn` must be that client's.
  Status steer(int client, uint32_t ifindex, uint32_t qpn, bool on);
  /// Frames of interface `ifindex` that val/mask match go to the client's
  /// socket (`on`; rule `id` of the client's), or the rule goes. Only the
  /// interface's client (EPERM); ENOSPC past XdpSteer::kMaxRawRules.
  Status raw_rule(int client, uint32_t ifindex, uint64_t id, const wire::FlowKey& val,
                  const wire::FlowKey& mask, bool on);
  /// The client freed QP number `qpn`: it is no longer steered.
  void qpn_freed(int client, uint32_t qpn);
  /// The client is gone: its interfaces go back to the kernel.
  void client_gone(int client);
  /// Interfaces lent now.
  size_t size() const { return ports_.size(); }

 private:
  struct Port {
    int client = -1;
    int xsk = -1;  // uroced's copy of the socket's descriptor
    bool ready = false;
    std::unique_ptr<XdpSteer> steer;
    std::set<uint32_t> qpns;
    // Flow rules: the program's [0, raw.size()) in this order, and where
    // each of the client's ids is.
    std::vector<std::pair<uint64_t, XdpSteer::RawRule>> raw;
    std::map<uint64_t, uint32_t> raw_at;
  };
  void release(std::map<uint32_t, Port>::iterator it);
  XdpSteer::Mode mode_;
  std::map<uint32_t, Port> ports_;  // by interface index
  bool said_eperm_ = false;
};

}  // namespace uroce::daemon
