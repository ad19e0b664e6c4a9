// The process's network "NIC engine": receives the datagrams of every
// network QP of the process, hands each packet to the QP it names (any of
// the process's QPs: a packet may come in on another flow's socket), and
// runs the requesters' retransmission and RNR timers. One thread sleeps in
// epoll until a packet or the next deadline; an application polling a CQ
// also drives it (poll_now) so busy-polling programs do not wait for a
// thread wake-up.
#pragma once

#include <cstdint>

#include "transport/net_qp.h"

namespace uroce::transport {

class NetEngine {
 public:
  static NetEngine& get();
  /// The process's link settings, read once from UROCE_FAULTS and UROCE_CAPTURE.
  const NetLinkSettings& settings();
  /// Starts delivering packets and timers to `q` (starts the thread on first use).
  Status add(NetQp* q);
  /// Stops touching `q`; returns once no call into it is running.
  void remove(NetQp* q);
  /// A QP's deadline may have moved earlier than the thread's next wake-up.
  void kick(uint64_t deadline_ns);
  /// Handles what has arrived and what is due, without blocking; false if
  /// another thread is at it or no network QP exists. Cheap when idle.
  bool poll_now();
  /// Network QPs alive in this process (poll_now is a no-op when 0).
  static bool active();

 private:
  NetEngine() = default;
  void loop();
  /// One round: drain readable sockets, run due timers; caller holds run_mu.
  int round(const int* ready_slots, int n, uint64_t now);
};

}  // namespace uroce::transport
