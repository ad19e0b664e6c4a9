// The process's network "NIC engine": receives the datagrams of every
// network QP of the process, hands each packet to the QP it names (any of
// the process's QPs: a packet may come in on another flow's socket), and
// runs the requesters' retransmission and RNR timers. One thread sleeps in
// epoll until a packet or the next deadline; an application polling a CQ
// also drives it (poll_now) so busy-polling programs do not wait for a
// thread wake-up.
#pragma once

#include <cstdint>

#include "core/net_qp.h"

namespace uroce::core {

class NetEngine {
 public:
  static NetEngine& get();
  /// The process's link settings, read once from UROCE_FAULTS and UROCE_CAPTURE.
  const NetLinkSettings& settings();
  /// Starts delivering packets and timers to `q` (starts the thread on first use).
  Status add(NetQp* q);
  /// Stops touching `q`; returns once no call into it is running.
  void remove(NetQp* q);
  /// Reads `ep` too, a receiving socket of `q` beside its own: a multicast
  /// group's (NetQp::join; only packets for QP 0xFFFFFF go to `q`) or
  /// another address's (NetQp::add_address; packets go by destination QP as
  /// from `q`'s own). remove_socket (or remove(q)) before `ep` goes.
  Status add_socket(NetQp* q, link::UdpEndpoint* ep, bool multicast);
  /// Stops reading `ep`; returns once no call reading it is running.
  void remove_socket(link::UdpEndpoint* ep);
  /// A QP's deadline may have moved earlier than the thread's next wake-up.
  void kick(uint64_t deadline_ns);
  /// Handles what has arrived, without blocking; false if another thread is
  /// at it or no network QP exists. While an application keeps calling it
  /// (ibv_poll_cq on an empty CQ), the engine thread leaves the sockets to it
  /// and only runs timers: two busy pollers on two cores must not also wake a
  /// third thread per packet.
  bool poll_now();
  /// Before a receive is posted: packets that already arrived while the
  /// application polled (and this engine left the sockets to it) are handled
  /// first, as a NIC would have handled them on arrival; they must not
  /// consume a receive posted after them. One epoll check (no wait) when
  /// nothing is queued.
  static void catch_up() {
    if (active()) get().catch_up_slow();
  }
  /// The application is about to block (ibv_req_notify_cq): the engine
  /// thread watches the sockets again at once.
  void app_sleeps();
  /// The application posts work (ibv_post_send): like a poll, it keeps the
  /// engine thread off the sockets for a while (it will poll for the
  /// completions; a thread taking in ACKs meanwhile only competes with it).
  void app_posts();
  /// Network QPs alive in this process (poll_now is a no-op when 0).
  static bool active();

 private:
  NetEngine() = default;
  void loop();
  void catch_up_slow();
  /// One round: reads the sockets of `ready_slots`; caller holds run_mu.
  /// `drained` (optional): whether each was read until empty.
  /// `ack_per_batch`: ACKs go out once per batch of datagrams (else the
  /// caller decides: see NetQp::defer_acks).
  int round(const int* ready_slots, int n, bool* drained = nullptr, bool ack_per_batch = true);
};

}  // namespace uroce::core
