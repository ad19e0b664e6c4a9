// The network link's engine of one QP (RoCE v2): the RC requester and
// responder state machines (or UC's, or UD's receive side) bound to the
// QP's shared state (its receive queue or SRQ, CQ and MR table, through the
// target-side helpers of memory/target.h) and to its UDP sockets or its
// process's AF_XDP port. It reports to its QP through QpOwner only
// (net/link_engine.h). The owning process runs it: packets and timers
// come from the NetEngine thread, or from the application's thread while
// it polls a CQ; posts from ibv_post_send.
//
// A flow has one UDP source port, the same both ways (udp_sport). Each QP
// sends from an unconnected socket bound to <local IP>:<sport> (Linux gives
// such a socket's packets IP identification 0, which the ICRC covers) and
// receives on a socket bound to <local IP>:4791 and connected to <peer
// IP>:<sport>, so the kernel hands the flow's packets straight to the owning
// process: no daemon hop (docs/network-link.md, "How packets reach their
// QP"). A UD QP receives on an unconnected socket bound to <local IP>:4791
// (any sender; a datagram for another process's UD QP is delivered to it by
// net/ud_forward.h) and sends each datagram to the address its AH names.
// Opening, starting and closing: net/net_qp_open.cc.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/adaptive_lock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "contract/control_client.h"
#include "contract/counters.h"
#include "contract/device_info.h"
#include "contract/types.h"
#include "link/neighbor.h"
#include "link/udp_link.h"
#include "link/xdp_link.h"
#include "memory/peer_map.h"
#include "net/link_engine.h"
#include "net/qp_attr.h"
#include "transport/congestion.h"
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
  transport::CongestionConfig cc;             // UROCE_CC, UROCE_CC_TARGET_US
  bool selective = true;                      // UROCE_SR: selective repeat between uroce peers
  uint64_t reorder_ns = 100'000;              // UROCE_REORDER_US (RequesterConfig::reorder_ns)
};

class NetQp final : public LinkEngine {
 public:
  /// What the QP brings to its move to RTR.
  struct Setup {
    QpType type = QpType::kRc;
    uint32_t qpn = 0;
    const DeviceInfo* dev = nullptr;
    ControlClient* ctl = nullptr;
    HostShm* host = nullptr;
    /// Its attributes (the AV, destination QPN, PSNs, MTU, responder's).
    const QpModifyArgs* attr = nullptr;
    /// Its own shared state, as the target-side helpers take it.
    PeerQp self;
    /// Where its link and machines count (contract/counters.h), or null.
    NetCounters* counters = nullptr;
    /// UD: the multicast groups it is attached to (IPv4, network order).
    const std::vector<uint32_t>* groups = nullptr;
  };
  /// Opens the QP's sockets (and, RC and UC, its AF_XDP route when the
  /// process has a port there), its responder, and registers it with the
  /// process's NetEngine. Errno on failure.
  static Result<std::unique_ptr<NetQp>> open(const Setup& s, QpOwner* owner);
  ~NetQp() override;

  /// RTR -> RTS: the send side starts (RC, UC, XRC initiators).
  void start(const QpModifyArgs& a);
  /// The QP leaves the network link (RESET, destroy): the engine stops
  /// touching it; what it held back leaves; if its responder executed
  /// anything and `linger`, uroced answers the peer's retransmissions for
  /// a while (daemon/linger.h). Before the destructor.
  void close(bool linger);

  // LinkEngine
  void post(const SendWqe& w) override;
  void flush() override;
  void drain(bool on) override;

  /// UD: whether a datagram to `av` goes out here (its destination is not
  /// on this host) rather than on the intra-host link. Under the QP's send lock.
  bool takes(const AddressVector& av);
  /// How its packets travel (QpShm::link).
  QpLink link() const { return xdp_ ? QpLink::kXdp : QpLink::kUdp; }

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
  /// Whether its requester holds packets back until an ACK opens the
  /// congestion window (RcRequester::window_full); no lock.
  bool window_full() const { return window_full_.load(std::memory_order_relaxed); }
  /// Sends what the fault injector holds back (the engine calls it when idle).
  void flush_link();
  /// Sends the acknowledgement on_packet held back, if any, if it was held
  /// since `held_before` or earlier.
  void flush_acks(uint64_t held_before = UINT64_MAX);
  /// Counts a packet an AF_XDP port received for this QP (NetCounters::xdp;
  /// the engine's round, run_mu_ held: one writer at a time).
  void count_xdp_received(const wire::Packet& p) {
    if (!counters_) return;
    ++counters_->xdp.received;
    counters_->xdp.received_bytes += wire::encoded_size(p) + wire::kIcrcBytes;
  }
  /// Whether its packets go through an AF_XDP port (no lock: set at open).
  bool on_xdp() const { return xdp_ != nullptr; }

  /// UD: receives the datagrams sent to IPv4 multicast group `group`
  /// (network order) from now on, through a socket of its own that joined
  /// the group on this QP's interface (ibv_attach_mcast).
  Status join(uint32_t group);
  /// Stops receiving `group`'s datagrams (ibv_detach_mcast).
  void leave(uint32_t group);

  uint32_t qpn() const { return qpn_; }
  link::UdpEndpoint& rx() { return *rx_; }

 private:
  class Env;
  class Call;
  static constexpr size_t kMaxUdPayload = 4096;
  /// How far past a gap the responder keeps packets (PSNs): twice the
  /// largest window a uroce requester sends (RequesterConfig::window).
  static constexpr uint32_t kKeepOooPsns = 2048;
  NetQp();
  /// The responder the QP's type has (open, after the sockets).
  void make_responder() NO_THREAD_SAFETY_ANALYSIS;  // before the QP is shared
  /// The sockets and responder (open's first part).
  Status open_sockets(const Setup& s) NO_THREAD_SAFETY_ANALYSIS;  // before the QP is shared
  /// After the sockets (RC, UC): the QP's frames go through the process's
  /// AF_XDP port on its interface if it has one and the kernel knows the
  /// peer's neighbour (docs/afxdp-link.md); else its UDP socket stays, or
  /// with UROCE_LINK_XDP=require, EOPNOTSUPP.
  Status route_xdp(const Setup& s);
  /// UD: also receives at, and can send from, `ip` (another of the
  /// device's addresses, e.g. its IPv6 ones beside the first).
  Status add_address(const link::IpAddr& ip);
  /// Points a socket's counters at the QP's NetCounters, if it has them.
  void count(link::UdpEndpoint* e);
  void post_ud(const SendWqe& w) EXCLUDES(mu_);
  /// A send WQE is done: reported to the owner (under mu_).
  void complete(const transport::SqWqe& w, WcStatus st, uint32_t byte_len) REQUIRES(mu_);
  void send(wire::Packet& p) REQUIRES(mu_);
  /// Sends `p` through the QP's UDP socket, or its AF_XDP port.
  void transmit(wire::Packet& p) REQUIRES(mu_);
  /// A trace line if the congestion window changed since the last one
  /// (UROCE_TRACE; the end of every Call).
  void trace_window() REQUIRES(mu_);
  /// Sends the ACK on_packet held back, if any (caller holds mu_).
  void send_held_ack() REQUIRES(mu_);
  /// Nothing more is sent or answered, once the ACK of what the responder
  /// executed is out (caller holds mu_).
  void stop() REQUIRES(mu_);
  /// Selective repeat (wire/caps_mad.h, net_qp_caps.cc): asks the peer QP
  /// whether its responder keeps packets past a gap (one query; when:
  /// maybe_ask_caps).
  void ask_caps() REQUIRES(mu_);
  /// After a packet from the peer (on_packet): asks if it is the first (the
  /// peer is in RTR at least: a query before that would be lost), or if the
  /// requester met a loss since the last query and nothing answered; at
  /// most kMaxCapsQueries times, and only with UROCE_SR on.
  void maybe_ask_caps() REQUIRES(mu_);
  /// A UD packet with the GSI's Q_Key reached this connected QP: answers
  /// a capability query from its peer, or takes the answer to ours.
  /// Anything else is dropped, as a connected QP drops a UD packet.
  void on_caps(const wire::Packet& p) REQUIRES(mu_);

  QpOwner* owner_ = nullptr;
  QpType type_ = QpType::kRc;
  uint32_t qpn_ = 0;
  const DeviceInfo* dev_ = nullptr;
  ControlClient* ctl_ = nullptr;
  PeerQp self_;
  HostShm* host_ = nullptr;
  NetCounters* counters_ = nullptr;
  uint32_t pmtu_ = 1024;
  transport::ResponderConfig resp_cfg_;  // as opened (the linger hand-off compares against it)
  uint16_t sport_ = 0;
  link::IpAddr local_ip_;
  // Everything below. Not a spin lock: the sends of a call leave under it
  // (system calls); not std::mutex either: the application and the engine
  // thread meet here on one core (common/adaptive_lock.h). Lock order:
  // docs/threads.md.
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
  std::vector<Address> more_ GUARDED_BY(mu_);  // UD: add_address
  link::UdpAddr peer_;
  std::unique_ptr<transport::RcRequester> req_ GUARDED_BY(mu_);
  std::unique_ptr<transport::RcResponder> rc_resp_ GUARDED_BY(mu_);
  std::unique_ptr<transport::UcResponder> uc_resp_ GUARDED_BY(mu_);
  std::unique_ptr<transport::UdResponder> ud_resp_ GUARDED_BY(mu_);
  transport::CnpPacer cnp_ GUARDED_BY(mu_);  // RC, UC, XRC target: CE-marked requests earn CNPs
  bool flushed_ GUARDED_BY(mu_) = false;
  bool req_failed_ GUARDED_BY(mu_) = false;  // the requester failed in this call: the owner hears at its end
  bool in_packet_ GUARDED_BY(mu_) = false;   // inside on_packet: plain ACKs are held
  int calls_ GUARDED_BY(mu_) = 0;            // Calls open (the AF_XDP port's frames leave when the last ends)
  link::XdpPort* xdp_ = nullptr;             // set at open
  link::Mac peer_mac_ GUARDED_BY(mu_);
  link::UdpAddr local_ GUARDED_BY(mu_);
  uint32_t unsignaled_ GUARDED_BY(mu_) = 0;  // WQEs completed unsignaled since the last completion
  uint32_t ud_psn_ GUARDED_BY(mu_) = 0;      // UD: PSNs carry no meaning, but count up as on hardware
  link::IpAddr ud_dst_cache_ip_;             // takes(): the last UD destination looked at (QP's send lock)
  bool ud_dst_cache_remote_ = false;
  std::atomic<bool> ack_held_{false};  // also read without the lock (flush_acks)
  std::atomic<uint64_t> deadline_{UINT64_MAX};
  std::atomic<bool> window_full_{false};
  uint64_t ack_held_since_ GUARDED_BY(mu_) = 0;
  uint64_t traced_changes_ GUARDED_BY(mu_) = 0;  // CongestionControl::changes() at the last trace line
  // The capability exchange (ask_caps): the peer's QPN, queries sent,
  // whether an answer came, the requester's seq_naks at the last query.
  static constexpr uint32_t kMaxCapsQueries = 4;
  uint32_t peer_qpn_ GUARDED_BY(mu_) = 0;
  uint32_t caps_queries_ GUARDED_BY(mu_) = 0;
  bool caps_known_ GUARDED_BY(mu_) = false;
  bool caps_peer_seen_ GUARDED_BY(mu_) = false;  // a packet came from the peer since RTS
  uint64_t caps_naks_ GUARDED_BY(mu_) = 0;
  wire::Packet held_ack_ GUARDED_BY(mu_);  // no payload
};

}  // namespace uroce::core
