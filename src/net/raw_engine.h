// The engine of a RAW_PACKET QP's send queue: each SEND carries a whole
// Ethernet frame without its FCS (ibv_post_send(3); perftest's raw tools
// build it in the buffer), which leaves as it is: to the QPs of this
// process whose flow rules claim it (net/raw_switch.h), and onto the wire
// through the process's AF_XDP socket for the device's interface when it
// has one. The work completes at once, in order; a frame longer than the
// port's MTU allows completes with a local length error, never truncated.
#pragma once

#include <cstdint>
#include <vector>

#include "net/link_engine.h"

namespace uroce::link {
class XdpPort;
}

namespace uroce::core {

class RawEngine final : public LinkEngine {
 public:
  /// `max_frame`: the longest frame the port carries (its MTU, an Ethernet
  /// header and one VLAN tag); `wire`: the process's AF_XDP port for the
  /// interface, or null (then the frame only reaches this process's QPs).
  RawEngine(QpOwner& owner, uint32_t ifindex, uint32_t qpn, uint32_t max_frame, link::XdpPort* wire);
  void post(const SendWqe& w) override;
  void flush() override {}  // nothing is ever held
  void drain(bool on) override;

  static constexpr uint32_t kEthHeaderBytes = 14;

 private:
  QpOwner& owner_;
  const uint32_t ifindex_, qpn_, max_frame_;
  link::XdpPort* wire_;
  uint32_t unsignaled_ = 0;
  uint32_t queued_ = 0;  // frames put on the port's ring since this engine's last kick
  std::vector<uint8_t> frame_;
};

}  // namespace uroce::core
