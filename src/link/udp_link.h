// One RoCE v2 endpoint on a UDP socket (IPv4 or IPv6): sends packets encoded by
// src/wire with their ICRC, receives datagrams in batches and hands on those
// whose ICRC and headers check out. Packets may pass through the fault
// injector (UROCE_FAULTS) on the way out and are written to a capture file
// (UROCE_CAPTURE) both ways.
//
// The ICRC covers the IPv4 header, which a datagram socket neither writes
// nor sees, so both sides compute it over the header Linux writes (DF, no
// options; docs/network-link.md). The one field that varies is the
// identification: 0 on an unconnected socket with IP_PMTUDISC_DO; on a
// connected one (a sender with one peer: Linux keeps its route, ~0.4 us
// less per send here) a per-socket counter, +1 per datagram, which the
// endpoint learns once with a probe (a software transmit timestamp returns
// the datagram with its headers) and counts from then on. Packets sent while
// corked leave together: one sendmmsg, and each run of equal-size packets to
// one destination as one UDP GSO send, whose k-th datagram carries the send's
// identification + k. The receiver finds each packet's identification from
// its ICRC (wire/icrc.h) and accepts one outside 0..63 only where it
// continues that sender's counter (see deliver()). The receiving socket asks
// for UDP GRO, so a GSO run usually arrives in one read. Addresses are in
// network order, ports host order. Over IPv6 there is no identification:
// the ICRC masks every field Linux may vary (traffic class, flow label, hop
// limit), so senders are connected without a probe and the receiver checks
// the ICRC as is.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/fn_ref.h"
#include "common/status.h"
#include "link/fault_injector.h"
#include "link/ip_addr.h"
#include "wire/icrc.h"
#include "wire/packet.h"
#include "wire/pcap_writer.h"

namespace uroce::link {

struct UdpAddr {
  IpAddr ip;
  uint16_t port = 0;
};

inline bool same_addr(const UdpAddr& a, const UdpAddr& b) { return a.port == b.port && a.ip == b.ip; }

/// A socket address for `a`: sockaddr_in for IPv4, sockaddr_in6 otherwise.
struct SockAddr {
  union {
    sockaddr sa;
    sockaddr_in in;
    sockaddr_in6 in6;
  };
  socklen_t len = 0;
  const sockaddr* get() const { return &sa; }
};
SockAddr sockaddr_of(const UdpAddr& a);
/// The address a socket call filled in (IPv4 or IPv6).
UdpAddr udp_addr_of(const sockaddr* s);

class UdpEndpoint {
 public:
  struct Options {
    UdpAddr bind;  // a specific address: the ICRC needs the source address
    FaultConfig faults;
    std::string capture;                           // pcap file to write, or empty
    std::shared_ptr<wire::PcapWriter> capture_to;  // or a capture shared with other endpoints
    /// Share the port with other sockets that ask the same (SO_REUSEADDR):
    /// every RC flow's receive socket is bound to <address>:4791.
    bool reuse_addr = false;
    /// Receive only this peer's datagrams (connect()): Linux hands a
    /// datagram to the connected socket of its flow before any unconnected
    /// one on the port. Never for sending sockets (see the header comment).
    UdpAddr connect_to;
    /// A sending socket with one peer (an RC or UC flow): connect() it (see
    /// the header comment). Ignored with the fault injector on (it holds
    /// packets back and reorders them: identification 0 keeps it simple).
    UdpAddr peer;
    /// A multicast group's receiving socket: `bind` is <group>:4791 (so it
    /// gets the group's datagrams only), and it joins the group on the
    /// interface that has this address. Every socket of the host that joined
    /// gets its own copy of each datagram.
    uint32_t join_on = 0;  // IPv4, network order (groups are IPv4 only)
  };
  struct Stats {
    uint64_t sent = 0, send_errors = 0, received = 0, bad_icrc = 0, malformed = 0, cnp = 0;
    uint64_t id_relearned = 0;  // sending: counter learned again after an error
    uint64_t id_unproven = 0;   // receiving: identification that continues no known counter
  };
  /// A packet that passed its checks; `to` is the address it was sent to.
  /// Called for each packet a read delivers (a reference: it lives only for the call to poll()).
  using OnPacket = FnRef<void(const wire::Packet&, const UdpAddr& from, const UdpAddr& to)>;

  /// Datagrams one poll() reads at most (each may hold a GRO run of packets).
  static constexpr int kBatch = 16;
  /// Packets in one GSO send at most (Linux allows 64 or more).
  static constexpr int kMaxGsoSegments = 64;

  static Result<std::unique_ptr<UdpEndpoint>> open(const Options& o);
  /// Takes over an open, bound socket (another process's, passed with
  /// SCM_RIGHTS); receiving only.
  static std::unique_ptr<UdpEndpoint> adopt(int fd);
  ~UdpEndpoint();
  UdpEndpoint(const UdpEndpoint&) = delete;
  UdpEndpoint& operator=(const UdpEndpoint&) = delete;

  /// Encodes `p` (bth.pad is set) and sends it to `to` (its port is normally
  /// 4791), or queues it while corked.
  Status send(wire::Packet& p, const UdpAddr& to);
  /// Between cork() and uncork() (they nest), send() queues; the last
  /// uncork() sends the queue (see the header comment). Without effect while
  /// the fault injector is on: it works on single datagrams.
  void cork() { ++corked_; }
  void uncork() {
    if (--corked_ == 0 && !pending_.empty()) send_queued();
  }
  /// Handles the datagrams already waiting (at most `max`); never blocks.
  /// Returns how many datagrams were read (a GRO run counts once); `more`:
  /// whether the socket may still hold some (the read was full).
  int poll(OnPacket on_packet, int max = kBatch, bool* more = nullptr);
  /// Sends a packet the fault injector still holds back (call when idle).
  void flush();
  int fd() const { return fd_; }
  /// Connected sender: the identification its next datagram carries (what
  /// it learned and counted since).
  uint16_t next_id() const { return next_id_; }
  const UdpAddr& local() const { return local_; }
  const Stats& stats() const { return stats_; }

 private:
  UdpEndpoint() = default;
  struct Queued {
    size_t off;  // in queue_
    uint32_t len;
    UdpAddr to;
  };
  void transmit(std::span<const uint8_t> datagram, const UdpAddr& to);
  FaultInjector::Emit emit_to();
  /// A destination as the fault injector's tag (it may hold a packet back).
  uint64_t tag_of(const UdpAddr& to);
  void send_queued();
  /// Puts the ICRC into the encoded packet d[0, len) (ICRC space included),
  /// computed for IP identification `id`, and captures it if `capture`.
  void seal(uint8_t* d, size_t len, const UdpAddr& to, uint16_t id, bool capture);
  /// Hands one received datagram (a GRO run of `seg` bytes per packet when
  /// `seg` is set) to `on_packet`.
  void deliver(const uint8_t* d, size_t len, size_t seg, const UdpAddr& src, const UdpAddr& dst,
               OnPacket on_packet);
  /// Connected sender: learns the identification Linux gives the next datagram.
  bool learn_id();
  /// Connected sender: the identification of datagram `k` from now.
  uint16_t id_ahead(size_t k) const { return uint16_t(next_id_ + k); }
  /// Connected sender, first datagram: sends the encoded packet d[0, len)
  /// once more before it goes (sealed here; the caller seals it again).
  void prime(uint8_t* d, size_t len);
  /// After a send error Linux may or may not have counted the datagram.
  void send_failed(int err);
  /// Receiving: whether identification `id` from `src`, on a packet for
  /// destination QP `dqp`, is believable (see deliver()).
  bool id_ok(const UdpAddr& src, uint32_t dqp, uint16_t id);

  int fd_ = -1;
  bool v6_ = false;  // an IPv6 socket (no identification)
  UdpAddr local_;
  Stats stats_;
  std::unique_ptr<FaultInjector> faults_;
  std::vector<UdpAddr> tags_;  // the fault injector's destinations
  std::shared_ptr<wire::PcapWriter> capture_;
  wire::Ipv4Icrc icrc_;  // this endpoint's flows' ICRCs (seal, deliver)
  std::vector<uint8_t> tx_;
  std::vector<uint8_t> rx_;
  bool quiet_ = false;  // see poll()
  int corked_ = 0;
  std::vector<uint8_t> queue_;  // queued packets back to back, ICRC space included
  size_t queue_len_ = 0;        // bytes of queue_ in use
  std::vector<Queued> pending_;
  bool gso_ = true;  // off once the kernel refused a GSO send
  // Sending on a connected socket.
  UdpAddr peer_;          // empty: unconnected
  bool counted_ = false;  // connected over IPv4: next_id_ is Linux's counter
  uint16_t next_id_ = 0;  // what Linux gives the next datagram
  bool primed_ = false;
  // Receiving: the counters of connected senders, a few flows per socket.
  // A flow is its address and the QP its packets are for: one connected
  // socket sends for one QP, to one peer QP, and two QPs' sockets on one
  // address (source ports that hashed alike) count independently.
  UdpAddr from_;  // connect_to: every datagram comes from there
  struct IdFlow {
    UdpAddr src;
    uint32_t dqp = 0;
    uint16_t next = 0;  // the counter's next value
    bool known = false;
  };
  static constexpr int kIdFlows = 4;
  IdFlow id_flows_[kIdFlows];
  int id_victim_ = 0;
  UdpAddr id_candidate_src_;  // an unproven counter: its flow and next value
  uint32_t id_candidate_dqp_ = 0;
  uint16_t id_candidate_ = 0;
  bool id_candidate_known_ = false;
};

}  // namespace uroce::link
