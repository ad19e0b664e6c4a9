// A network RC (or XRC target) QP's last words, kept by uroced after its process destroyed
// it (often right before exiting): the peer may not have seen the final
// ACK (lost on the wire) and retransmits requests that were executed; a NIC
// would have answered them while the QP existed, and a program that exits
// right after its last receive (ibv_rc_pingpong's client) would otherwise
// leave its peer with IBV_WC_RETRY_EXC_ERR. For a few seconds uroced
// acknowledges such duplicates (SEND / WRITE PSNs below the expected PSN)
// with the QP's last MSN; it executes nothing and answers nothing else
// (READ and atomic duplicates need memory that is gone). Like TCP's TIME_WAIT.
//
// Its socket may also get packets for live QPs of other processes: flows
// that share the lingering flow's UDP source port (one flow label for every
// QP, as UCX sets) have receiving sockets with the same addresses, and Linux
// gives their datagrams to the one bound last. Those go on to their QP's
// process, as a process passes them on (core/net_forward.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "common/fn_ref.h"
#include "core/net_forward.h"
#include "link/udp_link.h"

namespace uroce::daemon {

class Lingers {
 public:
  /// Takes `rx_fd` (bound to <local IP>:4791, connected to the peer's flow).
  void add(int rx_fd, uint32_t qpn, uint32_t dest_qpn, uint32_t epsn, uint32_t msn, uint16_t sport,
           uint64_t now_ns);
  bool owns(int fd) const { return by_fd_.count(fd) != 0; }
  /// The socket is readable: answers what came in, and passes packets for
  /// other QPs on to the process `owner_pid` names (0: none).
  void on_readable(int fd, uint64_t now_ns, FnRef<int32_t(uint32_t qpn)> owner_pid);
  /// Closes what expired; returns their fds (already closed) through `gone`.
  template <typename F>
  void expire(uint64_t now_ns, F&& gone) {
    for (auto it = by_fd_.begin(); it != by_fd_.end();) {
      if (now_ns < it->second.until) {
        ++it;
        continue;
      }
      gone(it->first);
      log_end(it->second);
      it = by_fd_.erase(it);
    }
  }
  bool empty() const { return by_fd_.empty(); }
  size_t size() const { return by_fd_.size(); }

 private:
  struct Entry {
    std::unique_ptr<link::UdpEndpoint> rx, tx;
    link::UdpAddr peer;
    uint32_t qpn, dest_qpn, epsn, msn;
    uint64_t until;
    uint64_t acked = 0;  // duplicates answered
  };
  static void log_end(const Entry& e);
  std::map<int, Entry> by_fd_;
  core::NetForwarder forward_;
};

}  // namespace uroce::daemon
