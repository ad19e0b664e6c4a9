// One RoCE v2 endpoint on a UDP socket (IPv4 or IPv6): sends packets encoded by
// src/wire with their ICRC, receives datagrams in batches and hands on those
// whose ICRC and headers check out. Packets may pass through the fault
// injector (UROCE_FAULTS) on the way out and are written to a capture file
// (UROCE_CAPTURE) both ways.
//
// The ICRC covers the IPv4 header, which a datagram socket neither writes
// nor sees, so both sides compute it over the header Linux writes (DF, no
// options; docs/network-link.md). The one field that varies is the
// identification. Every socket sends unconnected with IP_PMTUDISC_DO, for
// which Linux writes identification 0 (k for the k-th datagram of a UDP GSO
// send) whatever happened to the datagrams before: a datagram dropped on
// its way out (netfilter, a full queue) changes nothing after it. Packets
// sent while corked leave together: one sendmmsg, and each run of equal-size
// packets to one destination as one UDP GSO send. The receiver finds each
// packet's identification from its ICRC (wire/icrc.h) and believes it on
// evidence (link/id_trust.h: 0..63, a counter continued, uroced's record of
// the frame, a successor). The receiving socket asks for UDP GRO, so a GSO
// run usually arrives in one read. Addresses are in network order, ports
// host order. Over IPv6 there is no identification: the ICRC masks every
// field Linux may vary (traffic class, flow label, hop limit), and the
// receiver checks the ICRC as is.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/counted.h"
#include "common/fn_ref.h"
#include "common/status.h"
#include "link/fault_injector.h"
#include "link/id_trust.h"
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

/// What the network engine reads packets from: a UDP socket (UdpEndpoint),
/// a process's AF_XDP port (XdpPort), a process's inbox of packets other
/// processes passed on (core::NetInbox). Each is read the same way, a batch
/// at a time: one virtual call per batch, never per packet.
class PacketSource {
 public:
  /// A packet that passed its checks, with the addresses it travelled
  /// between (`to`: where it was sent); called for each packet a read
  /// delivers (a reference: it lives only for the call to poll()).
  using OnPacket = FnRef<void(const wire::Packet&, const UdpAddr& from, const UdpAddr& to)>;

  /// Hands what waits, at most `max` reads' worth, to `on_packet`; never
  /// blocks. Returns how many were read; `more` (optional): whether more
  /// may wait (the read was full).
  virtual int poll(OnPacket on_packet, int max, bool* more) = 0;
  /// Readable (epoll) when packets wait.
  virtual int fd() const = 0;
  /// Packets wait inside (not in the descriptor) for something to happen
  /// (link/id_trust.h): poll again soon even if the descriptor is not readable.
  virtual bool parked() const { return false; }

 protected:
  ~PacketSource() = default;
};

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

constexpr size_t kMaxIpUdpHeaders = 48;  // IPv6 + UDP
/// The IP and UDP headers Linux writes for a RoCE v2 datagram of `len`
/// bytes (BTH .. ICRC) from `src` to `dst` (see the header comment: DF, no
/// options, identification `id`, IPv4 TOS or IPv6 traffic class `tos`) into
/// `h`; returns their length. The checksums only with `payload` (for a
/// capture: the ICRC masks them).
size_t ip_udp_headers(const UdpAddr& src, const UdpAddr& dst, size_t len, uint8_t h[kMaxIpUdpHeaders],
                      uint16_t id = 0, const uint8_t* payload = nullptr, uint8_t tos = 0);
/// The ICRC of `ib` (BTH up to the ICRC) sent from `src` to `dst` over IPv6.
uint32_t icrc_v6(const UdpAddr& src, const UdpAddr& dst, std::span<const uint8_t> ib);

/// The last step of a link's receive path, for a RoCE packet `ib` (BTH ..
/// ICRC) whose ICRC checked out: decodes it and hands it to `on_packet`,
/// counting into `s` (a link's Stats: cnp, malformed, received_bytes) what
/// went no further and the bytes of what did.
/// `rx_ns`: when it arrived (wire::Packet::rx_ns), 0 unknown; `ce`: its IP
/// header said Congestion Experienced (wire::Packet::ce).
template <class Stats, class OnPacket>
void decode_and_hand_on(std::span<const uint8_t> ib, Stats& s, const UdpAddr& src, const UdpAddr& dst,
                        OnPacket on_packet, uint64_t rx_ns = 0, bool ce = false) {
  wire::Packet pk;
  const wire::DecodeError e = wire::decode(ib, &pk);
  pk.rx_ns = rx_ns;
  pk.ce = ce;
  if (e == wire::DecodeError::kCnp) {
    ++s.cnp;  // a congestion notification: its requester acts on it
    on_packet(pk, src, dst);
    return;
  }
  if (e != wire::DecodeError::kNone) {
    ++s.malformed;
    return;
  }
  s.received_bytes += ib.size();
  on_packet(pk, src, dst);
}

class UdpEndpoint final : public PacketSource {
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
    /// A multicast group's receiving socket: `bind` is <group>:4791 (so it
    /// gets the group's datagrams only), and it joins the group on the
    /// interface that has this address. Every socket of the host that joined
    /// gets its own copy of each datagram.
    uint32_t join_on = 0;  // IPv4, network order (groups are IPv4 only)
    /// Asks the kernel for each datagram's receive time (SO_TIMESTAMPNS):
    /// packets then carry wire::Packet::rx_ns. A control message per read:
    /// for the sockets whose packets time round trips (an RC flow's).
    bool timestamps = false;
    /// Sends its datagrams marked ECN-capable (ECT(0), RFC 3168: a queue that
    /// fills marks them Congestion Experienced instead of dropping), and
    /// reports CE on what it receives (wire::Packet::ce): DCQCN's signals.
    bool ecn = false;
  };
  struct Stats {
    uint64_t sent = 0, send_errors = 0, received = 0, bad_icrc = 0, malformed = 0, cnp = 0;
    uint64_t sent_bytes = 0, received_bytes = 0;  // RoCE packets, BTH to ICRC
  };
  using OnPacket = PacketSource::OnPacket;

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
  /// Packets parked for want of evidence of their IPv4 identification
  /// (link/id_trust.h) are looked at again first. Returns how many datagrams
  /// were read (a GRO run counts once) plus parked packets handed on;
  /// `more`: whether the socket may still hold some (the read was full).
  int poll(OnPacket on_packet, int max = kBatch, bool* more = nullptr) override;
  /// Packets wait for evidence of their identification: poll() again soon
  /// even if the socket is not readable.
  bool parked() const override { return trust_.parked(); }
  /// Sends a packet the fault injector still holds back (call when idle).
  void flush();
  int fd() const override { return fd_; }
  const UdpAddr& local() const { return local_; }
  const Stats& stats() const { return stats_.get(); }
  const IdTrust::Stats& id_stats() const { return trust_.stats(); }
  /// Counts from now on into `s`, `id` and (with a fault injector) `faults`
  /// (contract/counters.h).
  void count_into(Stats* s, IdTrust::Stats* id, FaultInjector::Stats* faults) {
    stats_.use(s);
    trust_.count_into(id);
    if (faults_) faults_->count_into(faults);
  }

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
  /// What the kernel said of a datagram besides its bytes.
  struct Arrival {
    uint64_t ns = 0;  // when (fast clock; 0 unknown): wire::Packet::rx_ns
    uint8_t tos = 0;  // its IPv4 TOS or IPv6 traffic class (Options::ecn; else 0)
  };
  /// Hands one received datagram (a GRO run of `seg` bytes per packet when
  /// `seg` is set; Linux merges only datagrams of one TOS) to `on_packet`.
  void deliver(const uint8_t* d, size_t len, size_t seg, const UdpAddr& src, const UdpAddr& dst, Arrival a,
               OnPacket on_packet);
  /// A packet whose ICRC checked out (with identification `id`): captured,
  /// decoded and handed to `on_packet`.
  void hand_on(std::span<const uint8_t> p, const UdpAddr& src, uint16_t id, OnPacket on_packet, Arrival a);

  int fd_ = -1;
  bool v6_ = false;  // an IPv6 socket (no identification)
  UdpAddr local_;
  Counted<Stats> stats_;
  std::unique_ptr<FaultInjector> faults_;
  std::vector<UdpAddr> tags_;  // the fault injector's destinations
  std::shared_ptr<wire::PcapWriter> capture_;
  wire::Ipv4Icrc icrc_;  // this endpoint's flows' ICRCs (seal, deliver)
  std::vector<uint8_t> tx_;
  std::vector<uint8_t> rx_;
  bool quiet_ = false;       // see poll()
  bool timestamps_ = false;  // Options::timestamps
  uint8_t tos_ = 0;          // what its datagrams carry (Options::ecn: ECT(0))
  int corked_ = 0;
  std::vector<uint8_t> queue_;  // queued packets back to back, ICRC space included
  size_t queue_len_ = 0;        // bytes of queue_ in use
  std::vector<Queued> pending_;
  bool gso_ = true;  // off once the kernel refused a GSO send
  UdpAddr from_;     // connect_to: every datagram comes from there
  IdTrust trust_;    // which received IPv4 identifications are believed
};

}  // namespace uroce::link
