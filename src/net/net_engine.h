// The process's network "NIC engine": receives the datagrams of every
// network QP of the process, hands each packet to the QP it names (any of
// the process's QPs: a packet may come in on another flow's socket), and
// runs the requesters' retransmission and RNR timers. One thread sleeps in
// epoll until a packet or the next deadline; an application polling a CQ
// also drives it (poll_now) so busy-polling programs do not wait for a
// thread wake-up.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/fork_gate.h"
#include "contract/control_client.h"
#include "contract/device_info.h"
#include "contract/inbox.h"
#include "net/net_qp.h"

namespace uroce::core {

class RawEngine;

class NetEngine {
 public:
  /// The process's engine (made on first use, never destroyed: its thread
  /// may run while the process exits).
  static NetEngine& get();
  NetEngine(const NetEngine&) = delete;
  NetEngine& operator=(const NetEngine&) = delete;
  /// The process's link settings, read once from UROCE_FAULTS and UROCE_CAPTURE.
  const NetLinkSettings& settings();
  /// Starts delivering packets and timers to `q` (starts the thread on first use).
  Status add(NetQp* q);
  /// Stops touching `q`; returns once no call into it is running.
  void remove(NetQp* q);
  /// A RAW_PACKET QP of this process: the engine runs (its AF_XDP ports are
  /// read, and the application's polls read them) until remove_raw.
  Status add_raw();
  void remove_raw();
  /// A raw QP queued a frame on an AF_XDP port without the kick that sends
  /// it (net/raw_engine.h): the application's next empty poll, or this
  /// thread within kRawKickNs, kicks it.
  void raw_frame_queued();
  /// A raw QP's send queue (net/raw_engine.h), where frames wait for their
  /// pace or for room on a full AF_XDP ring: the application's polls and
  /// this thread release them as they fall due, until remove_raw_queue
  /// (which returns once no call into it runs).
  void add_raw_queue(RawEngine* e);
  void remove_raw_queue(RawEngine* e);
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
  /// The process's AF_XDP port on device `d`'s interface
  /// (docs/afxdp-link.md), asked of uroced through `ctl` the first time:
  /// null when this process has none there (UROCE_LINK_XDP=0, loopback,
  /// uroced without the privileges, another process has the interface: the
  /// reason is logged once at info level). Its frames for this process's
  /// QPs are read with the sockets.
  link::XdpPort* xdp_port(const DeviceInfo& d, ControlClient* ctl);

  /// Network QPs alive in this process (poll_now is a no-op when 0).
  static bool active() { return get().n_active_.load(std::memory_order_relaxed) != 0; }

 private:
  /// One thing the engine reads packets from (link::PacketSource), and
  /// what its packets are: its index in sources_ is its epoll data.
  struct Source {
    enum class Kind : uint8_t {
      kFree,     // a place left by a source that went
      kQp,       // a QP's own receiving socket
      kGroup,    // a multicast group's socket of a QP (NetQp::join): packets for QP 0xFFFFFF only
      kAddress,  // a UD QP's socket at another of its addresses (NetQp::add_address)
      kInbox,    // the process's inbox: packets other processes passed on, never passed on again
      kXdp,      // an AF_XDP port: frames uroced steered here, never passed on
    };
    Kind kind = Kind::kFree;
    link::PacketSource* src = nullptr;
    NetQp* qp = nullptr;  // kQp, kGroup, kAddress: the QP whose socket it is
    /// A socket's packets may be for another process's QP (passed on).
    bool may_pass_on() const { return kind == Kind::kQp || kind == Kind::kAddress; }
  };
  /// Who reads the sources without asking epoll which are readable (pick()).
  enum class Reader {
    kApplication,  // a poll (poll_now): few QPs, their sockets, the extras and the idle inbox now and then
    kSpinning,     // the engine thread right after traffic: every QP's socket, the inbox once used, the ports
  };

  NetEngine();
  /// The epoll sets, the inbox and the thread, once (run_mu_ held).
  Status start();
  /// Kicks the AF_XDP ports with raw frames queued (run_mu_ held).
  void flush_raw_tx(uint64_t now);
  /// Adds the AF_XDP sources to ep_ (on) or takes them out (run_mu_ held).
  void watch_xdp(bool on);
  /// Releases the raw frames due at `now` (paced, or waiting for ring
  /// room); when the next one is due, or UINT64_MAX (run_mu_ held).
  uint64_t pump_raw_queues(uint64_t now);
  void loop();
  void catch_up_slow();
  /// Adds `s` to sources_ and epoll (run_mu_ held); its index, or -1.
  int add_source(const Source& s);
  /// Takes source `i` out of epoll and sources_ (run_mu_ held).
  void drop_source(size_t i);
  /// One round: reads the sources `ready` names (indexes into sources_)
  /// and hands their packets to their QPs; caller holds run_mu_.
  /// `drained` (optional): whether each was read until empty.
  /// `ack_per_batch`: the ACKs the packets caused (held by
  /// NetQp::on_packet) go out after each batch of datagrams; else they
  /// wait for the caller's next flush_acks.
  int round(const int* ready, int n, bool* drained = nullptr, bool ack_per_batch = true);
  /// The sources readable now (one epoll_wait, no waiting); caller holds run_mu_.
  int readable(int* ready);
  /// The sources `who` reads directly, in the order read (caller holds
  /// run_mu_); *skipped: some were left unread this time.
  int pick(Reader who, int* ready, bool* skipped);
  /// Keeps source `i` in parked_ while it holds parked packets.
  void track_parked(size_t i);
  /// Adds the sources holding parked packets to ready[0, n) (each once); returns the new n.
  int with_parked(int* ready, int n) const;
  /// Logs what became of packets for other processes' QPs (when the last QP goes).
  void log_forwarded();
  // fork(): the engine thread does not survive it, and the child must not
  // read the parent's sockets (it has copies of their descriptors). The
  // thread works only under run_mu_, which fork() takes (common/fork_gate.h);
  // the child starts empty, with its own epoll and thread on first use.
  void fork_prepare();
  void fork_parent();
  void fork_child();

  // Held while calling into NetQps; add/remove take it. Lock order:
  // docs/threads.md (Qp::sq_mu_ -> xdp_mu_ -> run_mu_ -> NetQp::mu_).
  std::mutex run_mu_;
  std::vector<Source> sources_;  // by epoll data
  // AF_XDP ports, by interface (a null port: none for this process there).
  // Added under xdp_mu_ and run_mu_.
  struct Xdp {
    uint32_t ifindex;
    std::unique_ptr<link::XdpPort> port;
  };
  std::vector<Xdp> xdp_;
  std::vector<RawEngine*> raw_queues_;  // add_raw_queue (under run_mu_)
  std::mutex xdp_mu_;                   // serializes xdp_port (lock order: xdp_mu_ -> run_mu_)
  // Packets other processes of the host got for our QPs (contract/inbox.h).
  // `inbox_used_`: one has come, so more will (its flow's datagrams all go
  // to that other process): the application's polls read it every time
  // from then on.
  std::unique_ptr<NetInbox> inbox_;
  bool inbox_used_ = false;
  NetForwarder forwarder_;           // to the inboxes of other processes
  unsigned direct_polls_ = 0;        // poll_now's direct reads (under run_mu_)
  unsigned window_empty_polls_ = 0;  // poll_now: empty polls in a row while a window is full (run_mu_)
  // Sources (indexes) whose packets wait parked: read again by every round
  // even when not readable.
  std::vector<int> parked_;
  std::unordered_map<uint32_t, NetQp*> by_qpn_;
  int n_qps_ = 0;  // Source::Kind::kQp in sources_ (under run_mu_)
  /// Whether ep_ watches the AF_XDP sources (watch_xdp; under run_mu_).
  bool xdp_watched_ = true;
  int ep_ = -1, wake_ = -1;
  int ep_timers_ = -1;  // epoll with the wake-up only: the thread's sleep while the application polls
  std::atomic<uint64_t> app_poll_ns_{0};  // the application's last poll or post
  std::atomic<uint64_t> app_read_ns_{0};  // its last poll that read the sockets
  // Every packet that arrived before this time has been handled (an
  // application's poll read every source empty).
  std::atomic<uint64_t> drained_ns_{0};
  bool started_ = false;
  ForkGate fork_gate_;
  std::atomic<uint64_t> planned_wake_{0};
  std::atomic<int> n_active_{0};
  std::once_flag settings_once_;
  NetLinkSettings settings_;
  // Packets for QPs not in this process, by what became of them: UD
  // (UdForward), the others (NetForward); and packets from the inbox for no
  // QP of this process (never passed on again).
  std::atomic<uint64_t> forwarded_[5] = {};
  std::atomic<uint64_t> passed_[kNetForwardKinds] = {};
  std::atomic<uint64_t> inbox_lost_{0};
};

}  // namespace uroce::core
