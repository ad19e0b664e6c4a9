// The requester and completer of an RC QP on a packet link (IBA Vol. 1
// 9.7.1-9.7.4, 9.7.6): turns send WQEs into request packets (PSNs, PMTU
// segments, the A bit on each message's last packet), keeps them until
// acknowledged, and handles what comes back: ACKs (also implied by READ
// responses and atomic ACKs), READ response data, NAKs (go back to the NAK's
// PSN; RNR: wait the responder's timer; errors complete the WQE and move the
// QP to ERR), and the retransmission timer with retry_cnt / rnr_retry.
// With RequesterConfig::unreliable the same class is the UC requester.
// Pure: memory, the wire, completions and time are behind RequesterEnv.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <span>
#include <vector>

#include "common/counted.h"
#include "common/ring_queue.h"
#include "common/small_vec.h"
#include "transport/congestion.h"
#include "transport/packetizer.h"
#include "transport/timers.h"
#include "transport/types.h"
#include "wire/packet.h"

namespace uroce::transport {

/// A send WQE as the requester keeps it.
struct SqWqe {
  uint64_t wr_id = 0;
  MsgKind kind = MsgKind::kSend;
  bool signaled = true;
  bool solicited = false;
  bool fence = false;
  uint32_t len = 0;  // message bytes (atomics: 8)
  /// Gather list (SEND/WRITE) or scatter list (READ, atomic result); empty
  /// for inline data.
  SmallVec<iovec, 2> local;
  uint64_t remote_va = 0;
  uint32_t rkey = 0;
  uint32_t imm = 0;  // network order
  uint32_t inv_rkey = 0;
  uint64_t compare_add = 0, swap = 0;
  uint32_t xrc_srqn = 0;        // XRC: the SRQ at the target each packet names (XRCETH)
  SmallVec<uint8_t, 32> owned;  // inline data (a copy: the caller's buffer is theirs again)
};

class RequesterEnv {
 public:
  virtual ~RequesterEnv() = default;
  virtual void send(wire::Packet& p) = 0;
  /// A WQE is done (`status` != success: the QP moved to ERR).
  virtual void complete(const SqWqe& w, WcStatus status, uint32_t byte_len) = 0;
  virtual void qp_error() = 0;
  /// Draining (drain(true)): every WQE that had begun is complete.
  virtual void sq_drained() {}
};

struct RequesterConfig {
  uint32_t pmtu = 1024;
  uint32_t dest_qp = 0;
  uint32_t sq_psn = 0;
  uint64_t timeout_ns = 0;  // local ACK timeout (4.096 us * 2^timeout); 0 = wait forever
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;  // 7 = retry forever
  uint32_t max_rd_atomic = 16;
  uint32_t ack_every = 16;  // also ask for an ACK every this many packets of a long message
  /// Packets sent and not yet acknowledged, at most: the congestion
  /// window's cap (transport/congestion.h). A loss makes go-back-N resend
  /// what follows it, so the cap bounds that waste (and the bursts a
  /// receiver's socket must absorb). Not for UC (nothing is acknowledged).
  /// 1024 packets cover a loaded path's bandwidth-delay product between two
  /// namespaces (~1 MB in flight; bench/RESULTS.md).
  uint32_t window = 1024;
  /// The congestion control within that cap (its max_window is `window`).
  CongestionConfig cc;
  /// With a selective-repeat peer (set_selective), how long a PSN-sequence
  /// NAK waits before it is acted on: a packet overtaken on the way (two
  /// CPUs' backlogs of a veth, a multipath network) fills the gap within it,
  /// the responder's next ACK covers it, and nothing is resent and the
  /// window is not cut (as TCP's RACK waits a reordering window). At most an
  /// eighth of the local ACK timeout. 0: at once.
  uint64_t reorder_ns = 0;
  /// UC (unreliable connection): the same packets with the UC
  /// opcodes and no A bit; nothing is acknowledged, so a WQE is complete
  /// once its last packet is sent, and nothing is ever retransmitted.
  bool unreliable = false;
  /// An XRC initiator (IBA 9.8): RC's protocol with the XRC opcodes, each
  /// request packet naming its WQE's SRQ at the target (XRCETH).
  bool xrc = false;
};

struct RequesterStats {
  uint64_t packets = 0, retransmits = 0, timeouts = 0, rnr_naks = 0, seq_naks = 0, acks = 0, dropped = 0;
  uint64_t seq_naks_ignored = 0;    // of seq_naks: repeats of one just acted on
  uint64_t seq_naks_rechecked = 0;  // of those: acted on later, the gap still open
  uint64_t probes = 0;              // newest packets sent again early (see probe())
  uint64_t error_naks = 0;          // NAKs received: invalid request, remote access or operational error
  uint64_t resent_packets = 0;  // request packets sent again (go-back-N, probes, re-asks; not READ requests)
  uint64_t resent_bytes = 0;    // their payload bytes
  uint64_t holes_resent = 0;    // of resent_packets: alone, for a NAK of a selective-repeat peer
  uint64_t naks_reordered = 0;  // of seq_naks: their gap filled within RequesterConfig::reorder_ns
  // The capability exchange (the QP's, net/net_qp_caps.cc): queries sent to
  // the peer, and answers that it keeps packets past a gap.
  uint64_t caps_asked = 0, caps_selective = 0;
};

class RcRequester {
 public:
  RcRequester(const RequesterConfig& cfg, RequesterEnv* env)
      : cfg_(cfg), env_(env), next_psn_(cfg.sq_psn), una_(cfg.sq_psn), cc_(congestion_config(cfg)) {}
  /// Queues a WQE and sends what the window allows.
  void post(SqWqe&& w, uint64_t now_ns);
  /// One decoded response packet addressed to this QP.
  void on_response(const wire::Packet& p, uint64_t now_ns);
  /// A CNP for this QP (RoCE v2 Annex A17.9.3): a queue on the way to the
  /// responder marked one of its packets; the window shrinks.
  void on_cnp(uint64_t now_ns) {
    if (!cfg_.unreliable) cc_.on_cnp(now_ns);
  }
  /// The responder keeps packets that arrive past a gap (it said so:
  /// ResponderConfig::keep_ooo on a uroce peer): a PSN-sequence NAK then
  /// makes this resend the packet it names, alone, instead of going back.
  /// Off (IBTA's go-back-N) until called.
  void set_selective(bool on) { selective_ = on; }
  bool selective() const { return selective_; }
  /// Retransmission and RNR timers; call at or after next_deadline().
  void on_timer(uint64_t now_ns);
  /// When on_timer wants to run next (UINT64_MAX: nothing pending).
  uint64_t next_deadline() const;

  /// RTS -> SQD (on) and back (off): while draining, WQEs that have not
  /// begun wait; those that had finish, and then RequesterEnv::sq_drained
  /// is called once (IBA 10.3.1: SQ Drain).
  void drain(bool on, uint64_t now_ns);

  /// The QP went to ERR from outside (ibv_modify_qp, a responder error):
  /// every WQE still held completes with WR_FLUSH_ERR; later posts too.
  void flush();

  bool failed() const { return failed_; }
  size_t outstanding() const { return q_.size(); }
  /// Whether packets wait only for the congestion window to open: until an
  /// ACK comes, the QP has nothing to do (a poller may give up its core).
  bool window_full() const { return window_full_; }
  const RequesterStats& stats() const { return stats_.get(); }
  const CongestionControl& congestion() const { return cc_; }
  /// Counts from now on into `s` (contract/counters.h).
  void count_into(RequesterStats* s) { stats_.use(s); }
  /// The congestion window's counts and gauges from now on into `s`, `g`.
  void count_into(CongestionStats* s, CongestionGauges* g) { cc_.count_into(s, g); }

 private:
  struct Entry {
    SqWqe w;
    uint32_t first_psn = 0, npsn = 0;  // PSNs it occupies (a READ: one per response packet)
    uint32_t sent = 0;                 // packets (or READ PSNs) sent so far
    uint64_t read_done = 0;            // READ: response bytes placed
    bool started = false;
    bool answered = false;             // READ / atomic: all its response data is placed
    uint64_t reasked_at = UINT64_MAX;  // READ / atomic: asked again from this offset (once per loss)
  };

  static CongestionConfig congestion_config(const RequesterConfig& c) {
    CongestionConfig cc = c.cc;
    cc.max_window = c.window;
    return cc;
  }
  void pump(uint64_t now);
  /// Packets that may be unacknowledged now.
  uint32_t cwnd() const { return cc_.window(); }
  /// Calls sq_drained once when draining and nothing that had begun is left.
  void check_drained();
  void send_packet(Entry& e, uint32_t i, bool ask_ack = false);
  void send_read(Entry& e, uint32_t from_psn_index);
  /// Everything through `psn` is acknowledged by a response that arrived
  /// at `arrived` (round trips end there) and is handled at `now`.
  void ack_through(uint32_t psn, uint64_t now, uint64_t arrived);
  /// Local operations (BIND_MW, LOCAL_INV) now at the front complete.
  void complete_local_front();
  /// The oldest PSN not known to be acknowledged.
  uint32_t window_base() const;
  /// The service of the requests: UC, XRC or RC.
  wire::Service service() const {
    return cfg_.unreliable ? wire::Service::kUc : cfg_.xrc ? wire::Service::kXrc : wire::Service::kRc;
  }
  void go_back(uint32_t psn);
  /// A recovery begins: the round trips being timed are dropped (what they
  /// timed may go again, or is measured across the gap) and the tail-loss
  /// probes start over.
  void forget_timings();
  /// Acts on a PSN-sequence NAK at `psn`: the window shrinks and what the
  /// gap lost goes again (recover).
  void act_on_nak(uint32_t psn, uint64_t now);
  /// The reordering wait (RequesterConfig::reorder_ns) now; 0: none.
  uint64_t reorder_wait() const;
  /// A NAK waiting out reordering is settled if its gap has filled.
  void settle_reordered();
  /// A sequence NAK (or its second look) at `psn`: go back, or with a
  /// selective-repeat peer resend that packet alone.
  void recover(uint32_t psn);
  /// Sends the request packet at `psn` again (selective repeat); false if
  /// there is none to send (not yet sent, or within a READ's responses).
  bool resend_one(uint32_t psn);
  /// How long repeats of the NAK just acted on are ignored: a round trip
  /// (at most an eighth of the local ACK timeout).
  uint64_t nak_repeat_guard() const;
  /// When the newest packet goes again early (0: not now): four of the least
  /// round trips seen (at least kMinProbeNs) after the last progress, then
  /// at twice, four times... that (kMaxProbes at most), while before half
  /// the timer.
  uint64_t probe_time() const;
  void probe();
  void fail_front(WcStatus st);
  /// A response for a later READ / atomic came in while `x` still misses
  /// data from `from` (the responder answers in order, so it was lost):
  /// asks for it again once, without waiting for the timer.
  void reask(Entry& x);
  /// Completes the READs and atomics at the front whose data is all placed.
  void complete_answered(uint64_t now);
  void place(Entry& e, uint64_t offset, std::span<const uint8_t> bytes);

  RequesterConfig cfg_;
  RequesterEnv* env_;
  RingQueue<Entry> q_;  // posted and not completed, in order
  uint32_t next_psn_;   // PSN of the next new packet
  uint32_t una_;        // every PSN before it is acknowledged (see ack_through)
  static constexpr uint64_t kNakRepeatGuardNs = 1'000'000;  // without a timeout (it waits forever)
  static constexpr uint64_t kMinNakGuardNs = 5'000;
  static constexpr uint64_t kMinProbeNs = 200'000;
  static constexpr uint32_t kMaxProbes = 8;
  CongestionControl cc_;    // the window in use (within RequesterConfig::window)
  uint32_t reads_out_ = 0;  // READ / atomic requests outstanding
  uint64_t deadline_ = 0;   // retransmission timer (0: off)
  uint64_t rnr_until_ = 0;  // RNR wait (0: none)
  RetryBudget retries_{RetryRule::kAckTimeout}, rnr_retries_{RetryRule::kRnr};
  uint32_t since_ack_req_ = 0;
  // The last PSN-sequence NAK acted on: its PSN, when, and whether any.
  // The responder repeats a NAK while a gap stays open; repeats sent before
  // the resent packets reached it arrive within a round trip and are ignored.
  uint32_t nak_psn_ = 0;
  uint64_t nak_at_ = 0;
  bool nak_seen_ = false;
  uint64_t nak_recheck_ = 0;  // a repeat was ignored: look again then (0: none)
  // A NAK waiting out reordering (RequesterConfig::reorder_ns): until when
  // (0: none), and the PSN it named.
  uint64_t nak_wait_ = 0;
  uint32_t nak_wait_psn_ = 0;
  uint32_t probes_ = 0;  // early resends of the newest packet since the last progress
  // Round trips: first transmissions that asked for an ACK, oldest first,
  // with when they left; the ACK that covers one times it (Karn: a go-back
  // forgets them all, as what they timed may go again). sent_hi_: the PSN
  // after the highest ever sent.
  struct Timed {
    uint32_t psn = 0;
    uint64_t at = 0;
  };
  RingQueue<Timed> timed_;
  uint32_t sent_hi_ = cfg_.sq_psn;
  uint64_t now_ns_ = 0;  // the time of the call in progress (post, response, timer)
  bool failed_ = false;
  bool selective_ = false;  // set_selective
  // Selective repeat: the packets resent for the last NAK: how many, and the
  // PSN after them.
  static constexpr uint32_t kMaxSrRun = 64;
  uint32_t sr_run_ = 1;
  uint32_t sr_next_ = 0;
  bool sr_next_valid_ = false;
  bool window_full_ = false;  // pump stopped at the window (window_full)
  bool draining_ = false, drained_told_ = false;
  std::vector<uint8_t> scratch_;
  Counted<RequesterStats> stats_;
};

}  // namespace uroce::transport
