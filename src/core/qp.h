// Queue pair (owner side): the one owner of the QP's state and of its
// completions. Setup, the state machine and the move to ERR live in
// core/qp.cc; the receive side in core/qp_recv.cc; the send side (post,
// and what the link engines ask of and tell the QP: QpOwner) in
// core/qp_send.cc. The work itself is done by the engine of the link that
// carries it (net/link_engine.h): the intra-host one (core/shm_engine.h)
// or, from RTR on when the peer is elsewhere, the network one
// (net/net_qp.h). What a request does at its target QP: memory/target.h.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/adaptive_lock.h"
#include "common/spin_lock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "contract/flow_rule.h"
#include "contract/types.h"
#include "core/context.h"
#include "core/cq.h"
#include "core/qp_state.h"
#include "core/shm_engine.h"
#include "core/srq.h"
#include "net/link_engine.h"
#include "net/raw_engine.h"

namespace uroce::core {

class NetQp;
struct NetCounters;

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
  /// RAW_PACKET only: a work queue (ibv_create_wq: a receive queue and its
  /// CQ, no send side), or a receive-side scaling QP (no queues of its own:
  /// its rules' frames go to the work queues of `rss`).
  bool work_queue = false;
  const RssConfig* rss = nullptr;
};

class Qp final : private QpOwner {
 public:
  // (The factories fill the QP before anyone else can see it.)
  static Result<std::unique_ptr<Qp>> create(Context* ctx, const QpCreateArgs& a) NO_THREAD_SAFETY_ANALYSIS;
  /// ibv_open_qp: another handle on the XRC target QP `qpn` of domain
  /// `xrcd_id`, created by any process (IBA 11.5). Modify and query act on
  /// the shared QP; destroying the handle leaves the QP alone. The QP itself
  /// still ends with its creator's handle (then this one reports ENODEV).
  static Result<std::unique_ptr<Qp>> open_xrc_target(Context* ctx, uint32_t qpn,
                                                     uint32_t xrcd_id) NO_THREAD_SAFETY_ANALYSIS;
  ~Qp();
  /// False once an opened handle's QP is gone (always true for a creator's).
  bool exists() const;

  // --- setup and state (core/qp.cc)
  Status modify(const QpModifyArgs& a, uint32_t mask) EXCLUDES(sq_mu_);
  /// Snapshot of the attributes for ibv_query_qp.
  QpModifyArgs query() EXCLUDES(sq_mu_);
  QpState state() const { return QpState(shm_->state.load(std::memory_order_acquire)); }
  uint32_t qpn() const { return qpn_; }
  QpType type() const { return type_; }
  const QpCaps& caps() const { return cap_; }
  bool sq_sig_all() const { return sq_sig_all_; }
  uint32_t local_id() const { return local_id_; }

  // --- receive side (core/qp_recv.cc)
  Status post_recv(uint64_t wr_id, const Sge* sge, uint32_t num_sge);
  /// A receive of this QP failed where its owner polled it (core/eager.h):
  /// the QP goes to ERR, its receives are flushed and the owner hears `ev`.
  void responder_error(AsyncEvent ev);

  // --- send side (core/qp_send.cc)
  /// Hands one WR to its link's engine (EINVAL/ENOMEM per verbs).
  Status post_send(const SendWqe& w) EXCLUDES(sq_mu_);
  /// Called from poll_cq: `n` send-queue slots completed.
  void retire(uint32_t n) { sq_retired_.fetch_add(n, std::memory_order_relaxed); }

  // --- multicast (core/qp_send.cc): UD QPs on the network link
  /// ibv_attach_mcast: EINVAL unless a UD QP and an IPv4-mapped multicast
  /// GID; EOPNOTSUPP for a QP that only the shared-memory link serves.
  /// Attaching twice is no error.
  Status attach_mcast(const uint8_t gid[16]);
  /// ibv_detach_mcast: EINVAL if not attached.
  Status detach_mcast(const uint8_t gid[16]);
  /// Attached to a group (ibv_destroy_qp then fails with EBUSY).
  bool mcast_attached();

  // --- flow steering (core/qp_flow.cc): RAW_PACKET QPs
  /// ibv_create_flow: frames of the QP's device that `r` matches come to
  /// its receive queue (net/raw_switch.h); the rule's handle. EINVAL for a
  /// QP of another type; EPERM without CAP_NET_RAW.
  Result<uint64_t> create_flow(const FlowRule& r);
  /// ibv_destroy_flow.
  Status destroy_flow(uint64_t handle);
  /// Rules name this QP (ibv_destroy_qp then fails with EBUSY).
  bool has_flows() const;
  /// Packet pacing of a RAW_PACKET QP's sends (IBV_QP_RATE_LIMIT,
  /// ibv_modify_qp_rate_limit): kbit/s, 0 unpaced; EINVAL outside the
  /// device's packet_pacing_caps or on another QP type.
  Status set_rate_limit(uint32_t kbps, uint32_t max_burst_bytes);

 private:
  Qp() = default;

  // --- QpOwner (core/qp_send.cc): what the link engines ask and tell
  WcStatus check_local(const SendWqe& w, iovec* loc, size_t* nl, uint64_t* len) override;
  WcStatus local_op(const SendWqe& w) override;
  void completed(uint64_t wr_id, WcOpcode op, WcStatus st, uint32_t byte_len, bool signaled,
                 uint32_t* unsignaled) override;
  void failed(const QpFailure& f) override { to_error(f); }
  void drained() override;

  /// The one move to ERR on an error (IBA 10.3.1, 10.8.3), whoever found
  /// it: the state (qp_enter_error, if not moved already), the receives
  /// flushed, a responder's async event raised. The engines' send work:
  /// the engine that failed flushed its own; the intra-host engine flushes
  /// what it holds when it next runs and finds ERR. No lock needed (the
  /// network engine's thread calls it).
  void to_error(const QpFailure& f);
  /// ibv_modify_qp to ERR (under sq_mu_): every engine flushes, then the
  /// receive queue (IBA 10.3.1.6).
  void flush_all() REQUIRES(sq_mu_);
  /// Completes every receive WQE of the QP's own receive queue with
  /// WR_FLUSH_ERR (IBA 10.3.1.6); a QP on an SRQ raises LAST_WQE_REACHED once.
  void flush_rq();
  /// Creation (RC, UC with a receive queue of its own): the EagerRing that
  /// small SENDs from a peer on this host take, joined to the receive CQ.
  void eager_create() NO_THREAD_SAFETY_ANALYSIS;  // before the QP is shared
  /// post_recv: lowers the ring's limit for a receive that takes fewer
  /// bytes or names a key that is not valid now (under rq_mu_).
  void eager_vouch(const Sge* sge, uint32_t num_sge) REQUIRES(rq_mu_);
  /// The engine a WQE goes to: the network one from RTR on (UD: for a
  /// destination not on this host), else the intra-host one.
  LinkEngine& engine_for(const SendWqe& w) REQUIRES(sq_mu_);
  /// The engine that carries the send queue as a whole (SQD drains it).
  LinkEngine& send_engine() REQUIRES(sq_mu_);

  /// attach_mcast / detach_mcast of a RAW_PACKET QP (core/qp_flow.cc).
  Status raw_attach(const uint8_t gid[16]) REQUIRES(sq_mu_);
  Status raw_detach(const uint8_t gid[16]) REQUIRES(sq_mu_);

  // --- the network link (core/qp_send.cc)
  /// INIT -> RTR toward a peer not on this host: the network engine.
  Status net_open() REQUIRES(sq_mu_);
  /// The network engine goes (RESET, destroy): its counters are retired.
  void net_close() REQUIRES(sq_mu_);
  /// The counters block goes back to the context (added to its totals).
  void retire_counters();

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
  /// The attributes as last modified (the state is in shm_, not here).
  QpModifyArgs attr_ GUARDED_BY(sq_mu_){};
  /// en_sqd_async_notify of the last move to SQD (read by drained(), which
  /// the network engine's thread may call).
  std::atomic<bool> sqd_notify_{false};
  /// A QP on an SRQ has raised LAST_WQE_REACHED since its last reset.
  std::atomic<bool> last_wqe_raised_{false};

  // Locks: docs/threads.md has the order. sq_mu_ (an AdaptiveLock: its
  // holder may make system calls, e.g. a process_vm_writev or a peer's
  // resolution through uroced) serializes the send side: posts, modify,
  // the intra-host engine. rq_mu_ (a spin lock: loads and stores only)
  // the receive side's posts.
  AdaptiveLock sq_mu_;
  SpinLock rq_mu_;
  uint64_t rq_head_seen_ GUARDED_BY(rq_mu_) = 0;  // private copy of the RQ's head (see rq_post)
  // The EagerRing (core/eager.h): its place in the receive CQ (-1: none),
  // the limit as last stored and the last region a receive named (under rq_mu_).
  EagerRing* eager_ = nullptr;
  uint64_t eager_off_ = 0;
  size_t eager_bytes_ = 0;
  int eager_place_ = -1;
  uint32_t eager_limit_ GUARDED_BY(rq_mu_) = 0;
  MrCache rq_mr_cache_ GUARDED_BY(rq_mu_){};
  // Send-queue occupancy: WQEs posted (stored under sq_mu_ only, so no
  // locked instruction on the post path) minus those retired by poll_cq.
  std::atomic<uint32_t> sq_posted_{0};
  std::atomic<uint32_t> sq_retired_{0};
  MrCache local_mr_cache_ GUARDED_BY(sq_mu_){};  // the last local MR a WQE used
  /// The intra-host link's engine (every QP has it: UD QPs on the network
  /// send to this host's peers through it).
  std::unique_ptr<ShmEngine> shm_engine_;
  std::unique_ptr<NetQp> net_ GUARDED_BY(sq_mu_);
  /// A RAW_PACKET QP's engine (it has no other; a work queue or an RSS QP
  /// has none).
  std::unique_ptr<RawEngine> raw_engine_;
  std::unique_ptr<RssConfig> rss_;  // an RSS QP's hash and table
  bool raw_user_ = false;           // counted in NetEngine::add_raw
  /// Rule `handle` of the raw switch on the wire too: uroced's program
  /// steers the frames `r` matches to this process's AF_XDP socket for the
  /// device's interface, `port` (wire_port()), if it has one (`r` null:
  /// the rule goes).
  Status wire_rule(link::XdpPort* port, uint64_t handle, const FlowRule* r);
  /// This process's AF_XDP port on the device's interface, if any.
  link::XdpPort* wire_port() const;
  NetCounters* counters_ = nullptr;  // net_'s, or a raw QP's, counters in the context's segment
  std::vector<uint32_t> mcast_ GUARDED_BY(sq_mu_);  // groups attached (IPv4, network order)
  struct RawGroup {
    uint8_t mac[6];
    uint64_t handle;  // its rule in the raw switch
  };
  std::vector<RawGroup> raw_groups_ GUARDED_BY(sq_mu_);  // a RAW_PACKET QP's groups
};

/// Process-wide table of local QPs by local id (completions name their QP).
void qp_retire(uint32_t local_id, uint32_t n);

}  // namespace uroce::core
