// A network RC (or XRC target) QP's last words, kept by uroced after its process destroyed
// it (often right before exiting): the peer may not have seen the final
// ACK (lost on the wire) and retransmits requests that were executed; a NIC
// would have answered them while the QP existed, and a program that exits
// right after its last receive (ibv_rc_pingpong's client) would otherwise
// leave its peer with IBV_WC_RETRY_EXC_ERR. For a few seconds uroced
// acknowledges such duplicates (SEND / WRITE PSNs below the expected PSN)
// with the QP's last MSN; it executes nothing and answers nothing else
// (READ and atomic duplicates need memory that is gone). Like TCP's TIME_WAIT.
// What a duplicate gets is decided by the QP's own responder code
// (transport::RcResponder, in its lingering mode), not by a copy of it.
//
// Its socket may also get packets for live QPs of other processes: flows
// that share the lingering flow's UDP source port (one flow label for every
// QP, as UCX sets) have receiving sockets with the same addresses, and Linux
// gives their datagrams to the one bound last. Those go on to their QP's
// process, as a process passes them on (contract/inbox.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "common/fn_ref.h"
#include "contract/inbox.h"
#include "link/udp_link.h"
#include "transport/rc_responder.h"

namespace uroce::daemon {

/// What the QP left: its number and its peer's, the responder's expected
/// PSN and MSN, its flow's source port, and whether it was an XRC target.
struct LingerArgs {
  uint32_t qpn = 0, dest_qpn = 0, epsn = 0, msn = 0;
  uint16_t sport = 0;
  bool xrc = false;
};

class Lingers {
 public:
  /// Takes `rx_fd` (bound to <local IP>:4791, connected to the peer's flow).
  void add(int rx_fd, const LingerArgs& a, uint64_t now_ns);
  bool owns(int fd) const { return by_fd_.count(fd) != 0; }
  /// The socket is readable: answers what came in, and passes packets for
  /// other QPs on to the process `owner_pid` names (0: none).
  void on_readable(int fd, uint64_t now_ns, FnRef<int32_t(uint32_t qpn)> owner_pid);
  /// Closes what expired; returns their fds (already closed) through `gone`.
  template <typename F>
  void expire(uint64_t now_ns, F&& gone) {
    for (auto it = by_fd_.begin(); it != by_fd_.end();) {
      if (now_ns < it->second->until) {
        ++it;
        continue;
      }
      gone(it->first);
      log_end(*it->second);
      it = by_fd_.erase(it);
    }
  }
  bool empty() const { return by_fd_.empty(); }
  size_t size() const { return by_fd_.size(); }

 private:
  class Env;
  struct Entry {
    Entry();
    ~Entry();  // (Env is complete only in linger.cc)
    std::unique_ptr<link::UdpEndpoint> rx, tx;
    link::UdpAddr peer;
    uint32_t qpn = 0;
    uint64_t until = 0;
    std::unique_ptr<Env> env;
    std::unique_ptr<transport::RcResponder> resp;
  };
  static void log_end(const Entry& e);
  std::map<int, std::unique_ptr<Entry>> by_fd_;
  core::NetForwarder forward_;
};

}  // namespace uroce::daemon
