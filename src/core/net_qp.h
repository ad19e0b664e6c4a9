// A QP on the network link (RoCE v2 over UDP): the RC requester and
// responder state machines (or UC's, or UD's receive side) bound to the
// QP's own memory, receive queue and CQs, and to its UDP sockets. The owning process runs
// it: packets and timers come from the NetEngine thread, or from the
// application's thread while it polls a CQ; posts from ibv_post_send.
//
// A flow has one UDP source port, the same both ways (udp_sport). Each QP
// sends from an unconnected socket bound to <local IP>:<sport> (Linux gives
// such a socket's packets IP identification 0, which the ICRC covers) and
// receives on a socket bound to <local IP>:4791 and connected to <peer
// IP>:<sport>, so the kernel hands the flow's packets straight to the owning
// process: no daemon hop (docs/network-link.md, "How packets reach their
// QP"). A UD QP receives on an unconnected socket bound to <local IP>:4791
// (any sender; a datagram for another process's UD QP is delivered to it by
// core/ud_forward.h) and sends each datagram to the address its AH names.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "common/adaptive_lock.h"
#include "common/spin_lock.h"
#include "common/status.h"
#include "core/counters.h"
#include "core/peer_map.h"
#include "core/types.h"
#include "link/neighbor.h"
#include "link/udp_link.h"
#include "link/xdp_link.h"
#include "transport/rc_requester.h"
#include "transport/rc_responder.h"
#include "transport/uc_responder.h"
#include "transport/ud_responder.h"

namespace uroce::core {

/// The UDP source port of the flow between QPs `lqpn` and `rqpn`: from the
/// AV's flow label, or when that is 0 from the product of the two QPNs (so
/// both ends compute the same port), folded into 0xC000..0xFFFF as Linux
/// does for Soft-RoCE and RoCE NICs (rdma_get_udp_sport).
uint16_t udp_sport(uint32_t flow_label, uint32_t lqpn, uint32_t rqpn);

/// Where the process's network QPs send what they send.
/// UROCE_LINK_XDP: unset or "1" when uroced lends an AF_XDP socket for the
/// device's interface (docs/afxdp-link.md), "0" never, "require": an RC or UC
/// QP that cannot have one fails RTR (EOPNOTSUPP; for tests that must run on
/// the AF_XDP link).
enum class XdpUse { kNever, kWhenLent, kRequired };

struct NetLinkSettings {
  link::FaultConfig faults;                   // UROCE_FAULTS
  std::shared_ptr<wire::PcapWriter> capture;  // UROCE_CAPTURE
  XdpUse xdp = XdpUse::kWhenLent;             // UROCE_LINK_XDP
};

class NetQp {
 public:
  struct Config {
    core::QpType type = core::QpType::kRc;  // kRc, kUc or kUd
    uint32_t qpn = 0;
    link::IpAddr local_ip, remote_ip;  // IPv4 or IPv6, one family (UD: no remote)
    uint16_t sport = 0;                // this QP's source port
    uint16_t peer_sport = 0;           // the peer's (the same, except between two QPs of one host)
    uint32_t pmtu = 1024;
    transport::ResponderConfig resp;
    /// Where the QP's link and machines count (core/counters.h), or null.
    core::NetCounters* counters = nullptr;
  };
  /// The owner's side of a send completion (it knows the CQ and the
  /// unsignaled bookkeeping); runs under the NetQp's lock.
  using SendDone = std::function<void(const transport::SqWqe&, core::WcStatus, uint32_t byte_len)>;

  /// `self` is the QP's own shared state as PeerMap resolves it (receive
  /// queue or SRQ, CQ, MR table: the same helpers the intra-host link uses).
  static Result<std::unique_ptr<NetQp>> open(const Config& c, const core::PeerQp& self, core::HostShm* host,
                                             const NetLinkSettings& link, SendDone done);
  ~NetQp();

  /// From now on the QP's packets leave as frames through `port` (the
  /// process's AF_XDP port on the QP's interface: docs/afxdp-link.md) to
  /// the neighbour `peer_mac`, instead of through its UDP socket. Before
  /// anything is sent (at RTR).
  void use_xdp(link::XdpPort* port, const link::Mac& peer_mac);
  /// Whether its packets go through an AF_XDP port (use_xdp; no lock: set once, before the engine reads it).
  bool on_xdp() const { return xdp_ != nullptr; }

  /// RTR -> RTS: the send side starts.
  void start_requester(const transport::RequesterConfig& c);
  /// RTS -> SQD (`on`) and back: WQEs not begun wait; `drained` runs once
  /// every WQE that had begun is complete (under the NetQp's lock).
  void drain(bool on, std::function<void()> drained = {});
  /// Queues a WQE (the caller checked its local keys).
  void post(transport::SqWqe&& w);
  /// UD: one datagram to `dst`, complete at once (UD has no ACKs); from
  /// `src` if the QP has that address (add_address), else from its first
  /// address of `dst`'s family. Returns false if it has none.
  bool send_ud(const link::IpAddr& dst, const link::IpAddr& src, uint32_t dest_qpn, uint32_t qkey,
               bool has_imm, uint32_t imm, bool solicited, std::span<const uint8_t> payload);
  /// One packet whose destination QP is this one, with the addresses it
  /// travelled between. A plain ACK it causes is held (coalesced with the
  /// ones before: one per QP) until flush_acks: the engine sends them after
  /// a batch of datagrams, and while an application polls, at its next poll
  /// or post, so that it gets its completion without first paying for the
  /// ACK's system call (IBA 9.7.5.1.6 lets a responder coalesce ACKs).
  void on_packet(const wire::Packet& p, const link::UdpAddr& from, const link::UdpAddr& to);
  void on_timer(uint64_t now_ns);
  /// When on_timer is due next (UINT64_MAX: never); no lock.
  uint64_t next_deadline() const { return deadline_.load(std::memory_order_relaxed); }
  /// ibv_modify_qp to ERR: outstanding WQEs complete with WR_FLUSH_ERR and
  /// nothing is answered any more.
  void flush();
  /// Sends what the fault injector holds back (the engine calls it when idle).
  void flush_link();
  /// Sends the acknowledgement on_packet held back, if any, if it was held
  /// since `held_before` or earlier.
  void flush_acks(uint64_t held_before = UINT64_MAX);
  /// Counts a packet an AF_XDP port received for this QP (NetCounters::xdp;
  /// the engine's round, run_mu_ held: one writer at a time).
  void count_xdp_received(const wire::Packet& p) {
    if (!cfg_.counters) return;
    ++cfg_.counters->xdp.received;
    cfg_.counters->xdp.received_bytes += wire::encoded_size(p) + wire::kIcrcBytes;
  }

  /// UD: receives the datagrams sent to IPv4 multicast group `group`
  /// (network order) from now on, through a socket of its own that joined
  /// the group on this QP's interface (ibv_attach_mcast).
  Status join(uint32_t group);
  /// Stops receiving `group`'s datagrams (ibv_detach_mcast).
  void leave(uint32_t group);
  /// UD: also receives at, and can send from, `ip` (another of the
  /// device's addresses, e.g. its IPv6 ones beside `Config::local_ip`).
  Status add_address(const link::IpAddr& ip);

  uint32_t qpn() const { return cfg_.qpn; }
  /// RC, for uroced's linger (daemon/linger.h): whether the responder
  /// executed anything, and where it stands. Takes the receive socket.
  struct Last {
    bool any = false;
    uint32_t dest_qpn = 0, epsn = 0, msn = 0;
    uint16_t sport = 0;
    int rx_fd = -1;
  };
  Last release_for_linger();
  link::UdpEndpoint& rx() { return *rx_; }

 private:
  /// Points a socket's counters at the QP's NetCounters, if it has them.
  void count_sender(link::UdpEndpoint* e);
  void count_receiver(link::UdpEndpoint* e);
  class Env;
  class Call;
  NetQp() = default;
  void send(wire::Packet& p);
  /// Sends `p` through the QP's UDP socket, or its AF_XDP port.
  void transmit(wire::Packet& p);
  /// Sends the ACK on_packet held back, if any (caller holds mu_).
  void send_held_ack();
  /// A requester or responder error: the QP goes to ERR (receives flushed;
  /// `async` also raises the event at the owner). A requester's error
  /// flushes the receives only after its error completion (flush_rq_due_).
  void to_error(bool async, AsyncEvent ev);

  Config cfg_;
  core::PeerQp self_;
  core::HostShm* host_ = nullptr;
  SendDone done_;
  // Everything below. Not a spin lock: the sends of a call leave under it
  // (system calls); not std::mutex either: the application and the engine
  // thread meet here on one core (common/adaptive_lock.h). Lock order:
  // core/qp.h (Qp::sq_mu_).
  AdaptiveLock mu_;
  std::unique_ptr<Env> env_;
  std::unique_ptr<link::UdpEndpoint> tx_, rx_;
  struct Group {
    uint32_t ip;
    std::unique_ptr<link::UdpEndpoint> rx;
  };
  std::vector<Group> groups_;  // join / leave only (the engine reads the sockets)
  struct Address {
    link::IpAddr ip;
    std::unique_ptr<link::UdpEndpoint> tx, rx;
  };
  std::vector<Address> more_;  // UD: add_address
  link::UdpAddr peer_;
  std::unique_ptr<transport::RcRequester> req_;
  std::unique_ptr<transport::RcResponder> rc_resp_;
  std::unique_ptr<transport::UcResponder> uc_resp_;
  std::unique_ptr<transport::UdResponder> ud_resp_;
  bool flushed_ = false;
  bool flush_rq_due_ = false;     // see to_error
  bool in_packet_ = false;        // inside on_packet: plain ACKs are held
  int calls_ = 0;                 // Calls open (the AF_XDP port's frames leave when the last ends)
  link::XdpPort* xdp_ = nullptr;  // see use_xdp
  link::Mac peer_mac_;
  link::UdpAddr local_;
  std::function<void()> drained_;      // see drain()
  uint32_t ud_psn_ = 0;                // UD: PSNs carry no meaning, but count up as on hardware
  std::atomic<bool> ack_held_{false};  // also read without the lock (flush_acks)
  std::atomic<uint64_t> deadline_{UINT64_MAX};
  uint64_t ack_held_since_ = 0;
  wire::Packet held_ack_;  // no payload
};

}  // namespace uroce::core
