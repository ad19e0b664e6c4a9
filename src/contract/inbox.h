// RC, UC and XRC packets (requests and acknowledgements) that Linux handed
// to a socket of this process although they name a QP of another process
// of this host.
//
// Each RC/UC flow is received on <local IP>:4791 by a socket connected to
// <peer IP>:<the flow's UDP source port>, and that port comes from the flow
// label, or from the QPN pair when the label is 0 (net/net_qp.cc,
// udp_sport). Flows whose ports coincide have receiving sockets with the
// same four addresses, and Linux hands every datagram of them to one of
// those sockets, whatever QP it names. That happens to all flows between
// two hosts when an application gives every QP the same flow label (UCX
// sets 0xFFFFF: all its RC flows use port 0xFFC0), and to some when QPN
// pairs fold onto the same port. Packets for another QP of the same process
// go to it directly (NetEngine); for another process's QP, the process that
// got the packet passes it on to the owner's inbox, an AF_UNIX datagram
// socket with an abstract name made of uroced's name and the owner's pid.
// Packets for one owner are gathered and leave as one datagram when the
// batch the engine read is handled: an inbox queues only
// net.unix.max_dgram_qlen datagrams (10 by default; one per packet lost most
// of a 64 KiB message's). A full inbox holds the sender back for at most
// kFullWaitMs, as a busy receiver holds back a link, before the batch is
// dropped (RC retransmits it). The owner's engine reads its inbox beside its
// UDP sockets and hands each packet to the QP it names, as if the QP's own
// socket had received it.
// Only processes of the inbox owner's user are heard (SCM_CREDENTIALS); a
// packet is never passed on twice. UD datagrams are delivered by whoever
// gets them (ud_forward.h). docs/network-link.md, "How packets reach their QP".
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "link/udp_link.h"
#include "wire/packet.h"

namespace uroce::core {

/// QP1 (the GSI) of a host is uroced's, as a NIC's is the kernel's: packets
/// for it go to the inbox of this owner (daemon/gsi.h), never a process.
constexpr int32_t kGsiOwner = 0;

/// What became of a packet for a QP of another process.
enum class NetForward {
  kPassed,       // in the owner's inbox
  kNoSuchQp,     // no QP of this host has that number (or it is UD)
  kThisProcess,  // ours, but not on the network link (not yet, or no more)
  kFull,         // the owner's inbox is full (or gone): lost, as on a busy link
};
constexpr int kNetForwardKinds = 4;

/// Passes packets on to the processes that own the QPs they name. Used by
/// one thread at a time (the engine's run_mu).
class NetForwarder {
 public:
  NetForwarder();
  ~NetForwarder();
  NetForwarder(const NetForwarder&) = delete;
  NetForwarder& operator=(const NetForwarder&) = delete;
  /// Queues `p` (its ICRC checked), which came from `from` to `to`, for
  /// process `pid`, which owns QP p.bth.dest_qp (the network engine finds
  /// it through the peer map; uroced knows every QP's owner); kPassed means
  /// queued. Never blocks but for a full batch (at most kFullWaitMs).
  NetForward add_for(int32_t pid, const wire::Packet& p, const link::UdpAddr& from, const link::UdpAddr& to);
  /// Sends what is queued (a datagram per owner and kMaxBatchBytes);
  /// returns the packets added since the last flush that could not go (the
  /// owner's inbox full or gone).
  uint64_t flush();
  /// Forgets every owner (a fork() child: the sockets are the parent's).
  void reset();

  static constexpr size_t kMaxBatchBytes = 256 * 1024;
  static constexpr int kFullWaitMs = 2;

 private:
  struct Batch {
    int32_t pid = 0;
    int fd = -1;  // connected to the owner's inbox
    uint32_t packets = 0;
    std::vector<uint8_t> bytes;
  };
  uint64_t send(Batch& b);
  std::vector<Batch> batches_;
  uint64_t lost_ = 0;  // in batches that went before flush()
};

/// A process's inbox for packets other processes pass on.
class NetInbox final : public link::PacketSource {
 public:
  /// Opens and binds the inbox of `owner`: this process's (one per process),
  /// or kGsiOwner's in uroced.
  static Result<std::unique_ptr<NetInbox>> open(int32_t owner);
  ~NetInbox();
  NetInbox(const NetInbox&) = delete;
  NetInbox& operator=(const NetInbox&) = delete;

  /// Readable when packets wait (epoll).
  int fd() const override { return fd_; }
  /// Hands what waits, at most `max` packets, to `on_packet`; never blocks.
  /// Returns how many were read; `more`: whether more may wait.
  int poll(OnPacket on_packet, int max, bool* more = nullptr) override;
  /// Datagrams refused: from another user's process, or malformed.
  uint64_t refused() const { return refused_; }

 private:
  NetInbox() = default;
  int fd_ = -1;
  uint64_t refused_ = 0;
  std::vector<uint8_t> buf_;
};

}  // namespace uroce::core
