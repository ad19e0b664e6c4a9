// Queue pair (owner side). Setup, state machine and receive side live in
// core/qp.cc; the send side (requester/completer) in core/qp_send.cc (a
// WRITE into the target region it wrote last: core/qp_write.cc),
// what a send does at its target (responder) in core/target.cc.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "common/adaptive_lock.h"
#include "common/spin_lock.h"
#include "common/status.h"
#include "core/context.h"
#include "core/cq.h"
#include "core/peer_map.h"
#include "core/srq.h"
#include "core/types.h"
#include "link/ip_addr.h"

namespace uroce::transport {
struct SqWqe;
}  // namespace uroce::transport

namespace uroce::core {

class NetQp;
struct NetCounters;

/// Where a packet goes (ibv_ah_attr, reduced to what RoCE uses).
struct AddressVector {
  uint8_t dgid[16];
  uint32_t flow_label;
  uint8_t sgid_index;
  uint8_t hop_limit;
  uint8_t traffic_class;
  uint8_t is_global;
  uint8_t sl;
  uint8_t port_num;
  uint16_t dlid;
};

/// One send work request as the transport executes it.
struct SendWqe {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t flags = 0;  // send_flags::
  uint32_t imm = 0;    // network order (imm_data / invalidate_rkey)
  uint32_t num_sge = 0;
  const Sge* sge = nullptr;  // lkey-checked, or raw addresses if kInline
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  uint32_t remote_qpn = 0;            // UD
  uint32_t remote_qkey = 0;           // UD
  uint32_t xrc_srqn = 0;              // XRC: the SRQ at the target
  const AddressVector* av = nullptr;  // UD
  Context::WindowBind bind{};         // BIND_MW (LOCAL_INV: the key in imm)
};

struct QpCaps {
  uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data;
};

struct QpCreateArgs {
  QpType type;
  uint32_t pd_id;
  Cq* send_cq;
  Cq* recv_cq;
  Srq* srq;
  QpCaps cap;
  bool sq_sig_all;
  uint64_t user_handle;
  uint32_t xrcd_id;  // XRC target QPs
};

/// Attributes a modify may carry (ibv_qp_attr, reduced).
struct QpModifyArgs {
  QpState state, cur_state;
  uint32_t access_flags, pkey_index, qkey, path_mtu, dest_qpn, rq_psn, sq_psn;
  uint8_t port_num, timeout, retry_cnt, rnr_retry, min_rnr_timer, max_rd_atomic, max_dest_rd_atomic,
      sq_draining, en_sqd_async_notify;
  AddressVector av;
  QpCaps cap;
};

class Qp {
 public:
  static Result<std::unique_ptr<Qp>> create(Context* ctx, const QpCreateArgs& a);
  /// ibv_open_qp: another handle on the XRC target QP `qpn` of domain
  /// `xrcd_id`, created by any process (IBA 11.5). Modify and query act on
  /// the shared QP; destroying the handle leaves the QP alone. The QP itself
  /// still ends with its creator's handle (then this one reports ENODEV).
  static Result<std::unique_ptr<Qp>> open_xrc_target(Context* ctx, uint32_t qpn, uint32_t xrcd_id);
  ~Qp();
  /// False once an opened handle's QP is gone (always true for a creator's).
  bool exists() const;

  // --- setup and state (core/qp.cc)
  Status modify(const QpModifyArgs& a, uint32_t mask);
  /// Snapshot of the attributes for ibv_query_qp.
  QpModifyArgs query() const;
  QpState state() const { return QpState(shm_->state.load(std::memory_order_acquire)); }
  uint32_t qpn() const { return qpn_; }
  QpType type() const { return type_; }
  const QpCaps& caps() const { return cap_; }
  bool sq_sig_all() const { return sq_sig_all_; }
  uint32_t local_id() const { return local_id_; }

  // --- receive side (core/qp.cc)
  Status post_recv(uint64_t wr_id, const Sge* sge, uint32_t num_sge);

  // --- send side (core/qp_send.cc)
  /// Executes (or queues behind deferred work) one WR. EINVAL/ENOMEM per verbs.
  Status post_send(const SendWqe& w);
  /// Retries deferred work (RNR / no response); true while work is still deferred.
  bool progress();
  /// True while deferred sends wait for the service thread (read by Service).
  bool wants_service() const { return wants_service_.load(std::memory_order_acquire); }
  /// Called from poll_cq: `n` send-queue slots completed.
  void retire(uint32_t n) { sq_retired_.fetch_add(n, std::memory_order_relaxed); }

  /// A receive of this QP failed where its owner polled it (core/eager.h):
  /// the QP goes to ERR, its receives are flushed and the owner hears `ev`.
  void responder_error(AsyncEvent ev);

  /// Moves to ERR: flushes deferred sends and posted receives (IBA 10.3.1 / C10-xx).
  void enter_error_st();

  /// On the network link (RoCE v2 over UDP) rather than shared memory.
  bool on_network() const { return net_ != nullptr; }

  // --- multicast (core/qp_net.cc): UD QPs on the network link
  /// ibv_attach_mcast: EINVAL unless a UD QP and an IPv4-mapped multicast
  /// GID; EOPNOTSUPP for a QP that only the shared-memory link serves.
  /// Attaching twice is no error.
  Status attach_mcast(const uint8_t gid[16]);
  /// ibv_detach_mcast: EINVAL if not attached.
  Status detach_mcast(const uint8_t gid[16]);
  /// Attached to a group (ibv_destroy_qp then fails with EBUSY).
  bool mcast_attached();

 private:
  struct Deferred {
    SendWqe w;
    std::vector<Sge> sge;
    std::vector<uint8_t> data;  // inline payload copy
    uint64_t next_try_ns = 0;
    uint32_t retries = 0;      // retry_cnt budget used
    uint32_t rnr_retries = 0;  // rnr_retry budget used
    bool rnr = false;
    uint64_t rq_tail_seen = 0;
  };
  enum class Exec { kDone, kRnr, kNoResponse };
  struct ExecOut {
    WcStatus status = WcStatus::kSuccess;
    uint32_t byte_len = 0;
    uint32_t rnr_timer = 0;
    uint64_t rq_tail = 0;
  };

  Qp() = default;
  Exec execute(const SendWqe& w, ExecOut* out);
  void complete_send(const SendWqe& w, WcStatus st, uint32_t byte_len);
  /// Pushes a send CQE, or counts an unsignaled WQE in *unsignaled (retired with the next CQE).
  void send_cqe(uint64_t wr_id, WcOpcode op, WcStatus st, uint32_t byte_len, bool signaled,
                uint32_t* unsignaled);
  void defer(const SendWqe& w, Exec why, const ExecOut& o);
  void flush_sq_st();
  bool progress_st();
  void flush_rq();
  /// Creation (RC, UC with a receive queue of its own): the EagerRing that
  /// small SENDs from a peer on this host take, joined to the receive CQ.
  void eager_create();
  /// post_recv: lowers the ring's limit for a receive that takes fewer
  /// bytes or names a key that is not valid now (under rq_mu_).
  void eager_vouch(const Sge* sge, uint32_t num_sge);
  /// The target QP `qpn`: the cached peer_ (RC/UC) or, for UD, resolved into *tmp.
  /// nullptr if it cannot be resolved.
  const PeerQp* peer_for(uint32_t qpn, PeerQp* tmp);
  /// Checks a WQE's gather list against the local MR table (IBA C10-xx:
  /// L_Key checks); kSuccess or the completion error.
  WcStatus gather(const SendWqe& w, iovec* loc, size_t* nl, uint64_t* len);
  /// BIND_MW or LOCAL_INV on this context's MR table (core/qp_send.cc).
  WcStatus local_op(const SendWqe& w);
  /// An RDMA WRITE of one gather element on a connected QP whose peer is on
  /// this host, into the target region last written (core/qp_write.cc):
  /// executes and completes `w` and returns true; false when anything is
  /// not as cached (nothing done: the general path runs). Under sq_mu_.
  bool write_direct(const SendWqe& w);
  /// Caches the peer's region `rkey` names (validated as respond_write
  /// validates it) with its address in this process; false if it cannot be.
  bool write_target_fill(uint32_t rkey, uint64_t raddr, uint64_t len);

  // --- the network link (core/qp_net.cc)
  /// Does this connected QP reach its peer over UDP (from the AV and UROCE_LINK)?
  bool wants_network() const;
  /// INIT -> RTR: the network QP's sockets and responder; errno on failure.
  Status net_open();
  /// After net_open (RC, UC): the QP's frames go through the process's
  /// AF_XDP port on its interface if it has one and the kernel knows the
  /// peer's neighbour (docs/afxdp-link.md); else its UDP socket stays, or
  /// with UROCE_LINK_XDP=require, EOPNOTSUPP.
  Status net_use_xdp(const link::IpAddr& remote);
  void net_start_requester();
  void net_close();
  /// Drops the NetQp and retires its counters.
  void net_drop();
  Status net_post(const SendWqe& w);
  /// UD: does this AH's destination take the network (cached per address)?
  bool ud_over_network(const AddressVector& av);
  Status net_post_ud(const SendWqe& w);
  void net_send_done(const transport::SqWqe& w, WcStatus st, uint32_t byte_len);

  Context* ctx_ = nullptr;
  QpShm* shm_ = nullptr;
  const PeerSegment* opened_from_ = nullptr;  // ibv_open_qp handles: the creator's segment
  uint64_t shm_off_ = 0;
  uint64_t shm_chunk_ = 0;  // the QP-slot chunk shm_off_ belongs to (Context::release_qp_slot)
  uint32_t qpn_ = 0;
  QpType type_ = QpType::kRc;
  uint32_t pd_id_ = 0;
  Cq* send_cq_ = nullptr;
  Cq* recv_cq_ = nullptr;
  Srq* srq_ = nullptr;
  RqRing* rq_ = nullptr;
  uint64_t rq_off_ = 0;
  size_t rq_bytes_ = 0;
  QpCaps cap_{};
  bool sq_sig_all_ = false;
  uint32_t local_id_ = 0;
  QpModifyArgs attr_{};

  // Locks, in the order they are taken (one never waits for an earlier one
  // while holding a later one):
  //   Qp::sq_mu_ -> NetEngine's run_mu -> NetQp::mu_ -> (leaves: Cq::mu_,
  //   Srq::mu_, Qp::rq_mu_, ControlClient::mu_, Segment::mu_; rq_mu_ and
  //   Cq::mu_ are taken one after the other, never nested).
  // sq_mu_ and NetQp::mu_ (AdaptiveLocks: spin, yield, then sleep; their
  // uncontended lock and release are inline, which ibv_post_send's path
  // feels: std::mutex cost ~80 instructions there) put a waiter to sleep: what they guard makes system calls
  // (a process_vm_writev, a peer's resolution through uroced, socket set-up at RTR, the sends of the network
  // link) and may wait for uroced. The spin locks (rq_mu_, Cq::mu_, Srq::mu_) guard loads and stores only.
  AdaptiveLock sq_mu_;
  SpinLock rq_mu_;
  uint64_t rq_head_seen_ = 0;  // private copy of the RQ's head (see rq_post), under rq_mu_
  // The EagerRing (core/eager.h): its place in the receive CQ (-1: none),
  // the limit as last stored and the last region a receive named (under rq_mu_).
  EagerRing* eager_ = nullptr;
  uint64_t eager_off_ = 0;
  size_t eager_bytes_ = 0;
  int eager_place_ = -1;
  uint32_t eager_limit_ = 0;
  MrCache rq_mr_cache_{};
  std::deque<Deferred> deferred_;
  uint32_t unsignaled_ = 0;  // WQEs since the last signaled one
  // Send-queue occupancy: WQEs posted (stored under sq_mu_ only, so no
  // locked instruction on the post path) minus those retired by poll_cq.
  std::atomic<uint32_t> sq_posted_{0};
  std::atomic<uint32_t> sq_retired_{0};
  std::atomic<bool> wants_service_{false};
  PeerQp peer_{};             // RC/UC: cached target
  PeerQp ud_peer_{};          // UD: the current WQE's target (under sq_mu_)
  MrCache local_mr_cache_{};  // the last local MR a WQE used (under sq_mu_)
  // write_direct's target (under sq_mu_): the peer region last written,
  // good while its MR-table slot keeps seqlock word `seq`, the peer QP is
  // the one it was validated for and peer_pages retired no mapping.
  struct WriteTarget {
    const MrEntry* e = nullptr;
    uint32_t seq = 1;  // odd: matches no stable slot
    uint32_t rkey = 0;
    uint64_t iova = 0, length = 0;
    uint8_t* here = nullptr;  // this process's address of iova
    uint64_t pages_gen = 0;
    const QpShm* qp = nullptr;  // the target QP validated (with qpn: the same QP still)
    uint32_t qpn = 0;
  } wt_;
  std::unique_ptr<NetQp> net_;
  NetCounters* counters_ = nullptr;  // net_'s counters, in the context's segment
  uint32_t net_unsignaled_ = 0;      // like unsignaled_, for network completions (under the NetQp's lock)
  link::IpAddr ud_dst_cache_ip_;     // the last UD destination looked at (under sq_mu_)
  bool ud_dst_cache_remote_ = false;
  std::vector<uint32_t> mcast_;  // groups attached (IPv4, network order; under sq_mu_)
  static constexpr size_t kMaxUdPayload = 4096;
};

/// Whether a UD QP of device `d` is on the network link (so it can join
/// multicast groups): not on the loopback device unless UROCE_LINK=udp.
bool ud_on_network(const DeviceInfo& d);

/// Process-wide table of local QPs by local id (completions name their QP).
void qp_retire(uint32_t local_id, uint32_t n);

}  // namespace uroce::core
