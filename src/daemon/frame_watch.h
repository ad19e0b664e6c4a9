// uroced's reader of RoCE v2 frames (link/id_watch.h): a packet socket that
// sees the IPv4 header of every RoCE v2 datagram arriving at this host (of
// its network namespace) whose identification is not one uroce's senders
// use, and records that identification per packet in a table its clients
// map read-only. Needs CAP_NET_RAW (root, or `setcap cap_net_raw+ep` on
// uroced); without it the table says nobody watches, and receivers rely on
// the other evidence (link/id_trust.h).
//
// The kernel's filter (classic BPF) passes only IPv4/UDP datagrams to port
// 4791, unfragmented, without options, with identification >= 64, that
// arrive (not those this host sends), and only their first 40 bytes (IPv4,
// UDP and base transport headers): traffic between uroce hosts never
// reaches this socket.
#pragma once

#include <cstdint>

#include "link/id_watch.h"

namespace uroce::daemon {

class FrameWatch {
 public:
  /// Makes the table (a memfd); opens the packet socket if allowed.
  /// False only if the table cannot be made.
  bool start();
  ~FrameWatch();
  /// The packet socket to wait on (-1: none).
  int fd() const { return sock_; }
  /// A read-only descriptor of the table for a client (the caller closes it), or -1.
  int client_fd() const;
  /// The socket is readable: records what arrived.
  void on_readable();
  /// The table (uroced's own receivers read it too), or nullptr.
  const link::IdWatchTable* table() const { return table_; }
  /// Frames recorded so far.
  uint64_t recorded() const { return recorded_; }

 private:
  int memfd_ = -1;
  int sock_ = -1;
  link::IdWatchTable* table_ = nullptr;
  uint64_t recorded_ = 0;
};

}  // namespace uroce::daemon
