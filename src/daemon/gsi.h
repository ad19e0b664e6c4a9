// QP1, the General Services Interface of this host's RoCE devices, which
// carries the Communication Manager's MADs (IBTA Vol. 1, 13.4, 12): uroced
// owns it, as the kernel does, so that connection state outlives no process
// and dies with none.
//
// On the network: one UDP socket per IP address of the (non-loopback)
// devices, bound to <address>:4791 beside the processes' own sockets
// (SO_REUSEADDR), opened when the first process opens the CM, before its
// QPs. Linux hands an unconnected flow's datagram to the socket of the
// address bound last, so a datagram for QP1 reaches either this socket or a
// process's UD QP socket,
// which passes it on to QP1's inbox (contract/inbox.h, kGsiOwner);
// what reaches this socket for another QP goes on to that QP's process the
// same way. A MAD is a UD SEND_ONLY to QP1 with the GSI's Q_Key
// (0x80010000) and a 256-byte payload; anything else that names QP1 is
// dropped and counted. Sent MADs leave from the socket of the local address
// to <peer>:4791, with identification 0 like every uroce packet
// (link/udp_link.h), and have their ICRC.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "common/fn_ref.h"
#include "contract/device_info.h"
#include "contract/inbox.h"
#include "link/udp_link.h"

namespace uroce::daemon {

class Gsi {
 public:
  /// A CM MAD (256 bytes) that came from `from` to this host's `to`.
  using OnMad = FnRef<void(std::span<const uint8_t> mad, const link::UdpAddr& from, const link::UdpAddr& to)>;
  /// The process that owns a QP of this host (0: none).
  using OwnerPid = FnRef<int32_t(uint32_t qpn)>;

  struct Stats {
    uint64_t received = 0, sent = 0, send_errors = 0;
    uint64_t not_mad = 0;    // named QP1 but no UD SEND of a MAD with the GSI's Q_Key
    uint64_t passed_on = 0;  // for QPs of processes
    uint64_t no_owner = 0;   // for no QP of this host
  };

  /// Opens the inbox. False if it cannot be bound (another uroced of this
  /// user in this network namespace has it: it then gets QP1's packets).
  bool start();
  /// Opens QP1's socket on every address of `devices` that has none yet;
  /// `watch(fd)` for each new one.
  void open(const std::vector<core::DeviceInfo>& devices, FnRef<void(int fd)> watch);
  int inbox_fd() const { return inbox_ ? inbox_->fd() : -1; }
  bool owns(int fd) const { return (inbox_ && fd == inbox_->fd()) || ports_.count(fd) != 0; }
  /// `fd` (one of owns()) is readable, or parked packets may be ready.
  void on_readable(int fd, OnMad on_mad, OwnerPid owner_pid);
  /// Packets wait for evidence of their IPv4 identification: call
  /// on_readable for each fd again soon.
  bool parked() const;
  std::vector<int> fds() const;
  /// Sends a MAD from this host's `local` address to QP1 at `remote`.
  bool send(const link::IpAddr& local, const link::IpAddr& remote, std::span<const uint8_t> mad);
  /// The node GUID of the device with address `local` (0 if none).
  uint64_t node_guid(const link::IpAddr& local) const;
  const Stats& stats() const { return stats_; }

 private:
  struct Port {
    std::unique_ptr<link::UdpEndpoint> ep;
    uint64_t guid;
  };
  void handle(const wire::Packet& p, const link::UdpAddr& from, const link::UdpAddr& to, OnMad on_mad,
              OwnerPid owner_pid, bool from_inbox);

  std::map<int, Port> ports_;  // by fd
  std::unique_ptr<core::NetInbox> inbox_;
  core::NetForwarder forward_;
  uint32_t psn_ = 0;
  Stats stats_;
};

}  // namespace uroce::daemon
