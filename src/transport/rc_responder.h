// The responder of an RC QP on a packet link (IBA Vol. 1 9.7.5): checks each
// request packet's PSN against the expected PSN, executes new requests
// (SEND into receive WQEs, RDMA WRITE, RDMA READ, atomics), answers
// duplicates (re-ACK; READ re-executed; atomics from a replay cache), and
// sends ACKs and NAKs (PSN sequence error once per gap, RNR with the QP's
// timer, invalid request, remote access, remote operational).
// Pure: memory, receive queues and the wire are behind ResponderEnv, so
// protocol tests drive it with crafted packets.
#pragma once

#include <cstdint>
#include <deque>
#include <span>

#include "common/counted.h"
#include "transport/packetizer.h"
#include "transport/reorder_buffer.h"
#include "transport/types.h"
#include "wire/packet.h"

namespace uroce::transport {

/// A claimed receive WQE, as the environment identifies it.
struct RecvTarget {
  uint64_t wr_id = 0;
  uint64_t handle = 0;  // the environment's own reference
};

/// What arrived with a completed SEND / WRITE_WITH_IMM.
struct RecvInfo {
  WcOpcode opcode = WcOpcode::kRecv;
  uint32_t imm = 0;  // network order
  bool has_imm = false;
  bool has_inv = false;
  uint32_t inv_rkey = 0;
  bool solicited = false;  // the last packet's SE bit (IBA 9.2.2)
  uint32_t src_qp = 0;     // UD: the sender's QP (DETH)
  bool with_grh = false;   // UD: the buffer starts with the 40-byte GRH
  uint8_t sl = 0;          // UD: wire::grh_packet_type of that GRH
};

enum class Access {
  kOk,
  kAccessError,  // bad R_Key, range or rights: NAK remote access error
  kInvalid,      // e.g. a misaligned atomic: NAK invalid request
  kLengthError,  // a SEND longer than the receive buffers
};

class ResponderEnv {
 public:
  virtual ~ResponderEnv() = default;
  /// Claims the next receive WQE; false if none is posted (RNR).
  virtual bool claim_recv(RecvTarget* out) = 0;
  /// Places bytes of a SEND at `offset` of the claimed receive's buffers.
  virtual Access place_recv(const RecvTarget& r, uint64_t offset, std::span<const uint8_t> bytes) = 0;
  virtual void complete_recv(const RecvTarget& r, WcStatus st, uint32_t byte_len, const RecvInfo& info) = 0;
  /// Checks `rkey` for [va, va+len) with `need` (access bits, and the
  /// QP's own access flags); returns where those bytes are in this process.
  virtual uint8_t* remote_memory(uint32_t rkey, uint64_t va, uint64_t len, uint32_t need) = 0;
  /// An 8-byte atomic at `at` (already checked), atomic against the device's other atomics.
  virtual uint64_t atomic(uint8_t* at, bool compare_swap, uint64_t compare_add, uint64_t swap) = 0;
  /// ATOMIC WRITE: stores `v` at `at` (8-byte aligned, already checked) at
  /// once, after everything before it, atomic against the other atomics.
  virtual void atomic_store(uint8_t* at, uint64_t v) {
    __atomic_store_n(reinterpret_cast<uint64_t*>(at), v, __ATOMIC_RELEASE);
  }
  /// Sends a response packet (ACK, NAK, READ response, atomic ACK); the
  /// payload span is only valid during the call.
  virtual void send(wire::Packet& p) = 0;
  /// A responder error moved the QP to ERR (the environment flushes and
  /// raises the async event).
  virtual void qp_error(AsyncEvent ev) = 0;
  /// A SEND with Invalidate: revokes the QP's type 2 memory window `rkey`
  /// (IBA 10.6.7); false if it has none by that key (an invalid request).
  virtual bool invalidate(uint32_t rkey) { return false; }
};

struct ResponderConfig {
  uint32_t pmtu = 1024;
  uint32_t dest_qp = 0;              // the requester's QPN: BTH.DestQP of our responses
  uint32_t epsn = 0;                 // rq_psn from ibv_modify_qp
  uint8_t min_rnr_timer = 0;         // IB encoding, sent in RNR NAKs
  uint32_t max_dest_rd_atomic = 16;  // READ / atomic requests remembered for duplicates
  /// An XRC target QP (IBA 9.8): XRC requests in, XRC responses out; which
  /// SRQ a SEND lands in is the environment's business (the XRCETH).
  bool xrc = false;
  uint32_t msn = 0;  // the MSN to start from (a QP that lives on: see lingering)
  /// The QP is gone and this answers for it a while (uroced, daemon/linger.h):
  /// duplicates of SENDs and WRITEs, which were executed, are acknowledged
  /// as before; everything else is dropped quietly (no memory, no receive
  /// queue is left to act on).
  bool lingering = false;
  /// Request packets past a gap kept until it fills, at most this many
  /// PSNs ahead (a power of two; 0: none, IBTA's go-back-N responder). A
  /// requester that does not know sends them again anyway: they are then
  /// duplicates, acknowledged as any. Set for uroce's own requesters to
  /// resend only the gap (docs/congestion.md, selective repeat).
  uint32_t keep_ooo = 0;
};

struct ResponderStats {
  uint64_t packets = 0, duplicates = 0, seq_naks = 0, rnr_naks = 0, dropped = 0, acks = 0;
  uint64_t seq_naks_repeated = 0;                           // of seq_naks: sent again for a gap still open
  uint64_t inv_req_naks = 0, access_naks = 0, op_naks = 0;  // error NAKs sent, by kind
  uint64_t ooo_kept = 0;       // packets past a gap kept (ResponderConfig::keep_ooo)
  uint64_t ooo_replayed = 0;   // of those: executed once the gap filled
  uint64_t caps_answered = 0;  // capability queries answered (the QP's, net/net_qp_caps.cc)
};

class RcResponder {
 public:
  RcResponder(const ResponderConfig& cfg, ResponderEnv* env)
      : cfg_(cfg), env_(env), epsn_(cfg.epsn), msn_(cfg.msn), ooo_(cfg.keep_ooo) {}
  /// One decoded request packet addressed to this QP.
  void on_request(const wire::Packet& p);

  uint32_t epsn() const { return epsn_; }
  uint32_t msn() const { return msn_; }
  bool failed() const { return failed_; }
  const ResponderStats& stats() const { return stats_.get(); }
  /// Counts from now on into `s` (contract/counters.h).
  void count_into(ResponderStats* s) { stats_.use(s); }

 private:
  /// The service of the requests it takes and the responses it sends.
  wire::Service service() const { return cfg_.xrc ? wire::Service::kXrc : wire::Service::kRc; }
  struct Replay {  // a READ or atomic request, kept to answer its duplicates
    uint32_t psn;
    bool atomic;
    uint64_t va;
    uint32_t rkey, len;
    uint64_t orig;  // atomics: the value returned the first time
    uint32_t msn;
  };

  /// A packet at the expected PSN: executed, then whatever it lets follow
  /// from the reorder buffer.
  void in_order(const wire::Packet& p, const wire::OpInfo& info);
  /// Checks the opcode sequence and executes.
  void accept(const wire::Packet& p, const wire::OpInfo& info);
  /// `p` arrived past a gap at epsn_ (and was `kept` in ooo_ or not): NAKs
  /// the gap once, and again as the rules in the .cc say.
  void gap(const wire::Packet& p, bool kept);
  /// A gap at epsn_ is NAKed for the first time (`last_seen`: the latest
  /// PSN seen past it): the repeat rule starts over.
  void open_gap(uint32_t last_seen);
  /// Sends the PSN-sequence NAK for the gap at epsn_.
  void nak_gap();
  void execute(const wire::Packet& p, const wire::OpInfo& info);
  void duplicate(const wire::Packet& p, const wire::OpInfo& info);
  void do_send(const wire::Packet& p, const wire::OpInfo& info);
  void do_write(const wire::Packet& p, const wire::OpInfo& info);
  void do_read(const wire::Packet& p);
  void do_atomic(const wire::Packet& p);
  void do_atomic_write(const wire::Packet& p);
  /// Sends the response packets of a READ; false (nothing sent) if the range fails its checks.
  bool read_responses(uint32_t first_psn, uint64_t va, uint32_t rkey, uint32_t len, uint32_t msn);
  void ack(uint32_t psn);
  void nak(uint32_t psn, uint8_t syndrome);
  /// NAK + QP error for a request the responder cannot execute.
  void fail(uint32_t psn, wire::NakCode code, AsyncEvent ev);
  void remember(const Replay& r);
  wire::Packet response(uint8_t op, uint32_t psn) const;

  ResponderConfig cfg_;
  ResponderEnv* env_;
  uint32_t epsn_;
  uint32_t msn_ = 0;
  uint8_t prev_op_ = kNoPrev;  // last request opcode executed (Op bits)
  static constexpr uint32_t kFirstRenak = 4;
  bool seq_nak_sent_ = false;  // a PSN-sequence NAK was sent for the gap at epsn_
  uint32_t gap_packets_ = 0;   // packets after the gap since then
  uint32_t renak_at_ = 0;      // the count of them at which the NAK goes again
  uint32_t gap_last_ = 0;      // the PSN of the last packet past the gap
  bool rnr_pending_ = false;   // an RNR NAK was sent for epsn_: later packets are dropped quietly
  bool failed_ = false;
  // The message in progress.
  RecvTarget recv_{};
  uint64_t recv_offset_ = 0;
  uint64_t write_left_ = 0;
  uint32_t write_len_ = 0;  // the WRITE in progress: its DMA length
  uint8_t* write_at_ = nullptr;
  std::deque<Replay> replay_;
  ReorderBuffer ooo_;
  // While packets from ooo_ are executed, their ACKs become one at the end.
  bool coalesce_ = false, ack_owed_ = false;
  uint32_t owed_psn_ = 0;
  Counted<ResponderStats> stats_;
};

}  // namespace uroce::transport
