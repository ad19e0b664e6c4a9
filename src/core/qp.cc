#include "core/qp.h"

#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstring>

#include "common/clock.h"
#include "common/log.h"
#include "contract/limits.h"
#include "core/eager.h"
#include "core/qp_state.h"
#include "core/service.h"
#include "memory/notify.h"
#include "memory/peer_map.h"
#include "memory/trace.h"
#include "net/net_engine.h"
#include "net/net_qp.h"
#include "net/net_route.h"
#include "net/raw_engine.h"
#include "net/raw_switch.h"

namespace uroce::core {
namespace {

constexpr uint32_t kMaxLocalQps = 1u << 16;

/// Local id -> Qp*, so completions can name their QP cheaply.
struct QpTable {
  // 512 KiB taken from the kernel's zero pages, faulted in as ids are used:
  // zeroing it all up front cost a process's first QP ~0.5 ms (129 page
  // faults, each a trip through the hypervisor on a VM).
  Qp** slots = nullptr;  // read and written through std::atomic_ref (slot())
  std::mutex mu;
  uint32_t next = 1;
};
QpTable& qp_table() {
  static QpTable* t = [] {  // lives for the process
    void* m = mmap(nullptr, sizeof(Qp*) * kMaxLocalQps, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) abort();
    auto* table = new QpTable();
    table->slots = static_cast<Qp**>(m);
    return table;
  }();
  return *t;
}
std::atomic_ref<Qp*> slot(uint32_t id) { return std::atomic_ref<Qp*>(qp_table().slots[id]); }

uint32_t table_insert(Qp* q) {
  QpTable& t = qp_table();
  std::lock_guard<std::mutex> g(t.mu);
  for (uint32_t i = 0; i < kMaxLocalQps - 1; ++i) {
    uint32_t id = t.next;
    t.next = t.next + 1 >= kMaxLocalQps ? 1 : t.next + 1;
    if (!slot(id).load()) {
      slot(id).store(q);
      return id;
    }
  }
  return 0;
}

}  // namespace

void qp_retire(uint32_t local_id, uint32_t n) {
  if (local_id == 0 || local_id >= kMaxLocalQps) return;
  if (Qp* q = slot(local_id).load(std::memory_order_acquire)) q->retire(n);
}

Result<std::unique_ptr<Qp>> Qp::create(Context* ctx, const QpCreateArgs& a) {
  const QpCaps& c = a.cap;
  if (c.max_send_wr > kLimits.max_qp_wr || c.max_recv_wr > kLimits.max_qp_wr ||
      c.max_send_sge > kLimits.max_sge || c.max_recv_sge > kLimits.max_sge ||
      c.max_inline_data > kLimits.max_inline_data)
    return Status(EINVAL);
  const bool xrc_ini = a.type == QpType::kXrcSend, xrc_tgt = a.type == QpType::kXrcRecv;
  const bool raw = a.type == QpType::kRawPacket;
  if (a.type != QpType::kRc && a.type != QpType::kUc && a.type != QpType::kUd && !xrc_ini && !xrc_tgt && !raw)
    return Status(EOPNOTSUPP);
  if ((a.work_queue || a.rss) && !raw) return Status(EINVAL);
  if (raw && !a.work_queue) {
    // Raw frames can carry any address: the kernel asks for CAP_NET_RAW
    // (uverbs' create_qp), and so does uroced.
    if (!ctx->ctl()) return Status(EPERM);
    if (Status st = ctx->ctl()->raw_access(); !st.is_ok()) {
      UROCE_WARN("RAW_PACKET QP refused: %s",
                 st.err() == EPERM ? "the process lacks CAP_NET_RAW" : strerror(st.err()));
      return st;
    }
  }
  // XRC (IBA 11.5): an initiator QP has only a send side; a target QP has
  // neither queue: receives come from the XRC SRQ each message names.
  const bool has_rq = !xrc_ini && !xrc_tgt && !a.rss;
  const bool has_sq = !xrc_tgt && !a.work_queue && !a.rss;
  if ((has_sq && !a.send_cq) || (has_rq && !a.recv_cq)) return Status(EINVAL);
  std::unique_ptr<Qp> q(new Qp());
  q->ctx_ = ctx;
  q->type_ = a.type;
  q->pd_id_ = a.pd_id;
  q->send_cq_ = a.send_cq;
  q->recv_cq_ = a.recv_cq;
  q->srq_ = a.srq;
  q->cap_ = c;
  // Report at least what was asked, as a NIC rounds up.
  if (q->cap_.max_send_sge == 0) q->cap_.max_send_sge = 1;
  if (!a.srq && q->cap_.max_recv_sge == 0) q->cap_.max_recv_sge = 1;
  if (q->cap_.max_inline_data < 64) q->cap_.max_inline_data = std::min<uint32_t>(64, kLimits.max_inline_data);
  q->sq_sig_all_ = a.sq_sig_all;
  auto slot = ctx->take_qp_slot();
  if (!slot.is_ok()) return Status(slot.err());
  q->shm_off_ = slot->off;
  q->shm_chunk_ = slot->chunk;
  q->shm_ = ctx->seg().at<QpShm>(q->shm_off_);
  if (!has_sq) q->cap_.max_send_wr = q->cap_.max_send_sge = q->cap_.max_inline_data = 0;
  if (!has_rq) {
    q->cap_.max_recv_wr = q->cap_.max_recv_sge = 0;
    if (xrc_tgt) q->cap_ = QpCaps{};
  } else if (a.srq) {
    q->rq_off_ = a.srq->off();
  } else {
    auto r = rq_ring_create(ctx, std::max<uint32_t>(c.max_recv_wr, 1), q->cap_.max_recv_sge, &q->rq_bytes_);
    if (!r.is_ok()) {
      ctx->put_back_qp_slot(slot.value());
      q->shm_off_ = 0;
      return Status(r.err());
    }
    q->rq_off_ = r.value();
    ctx->seg().at<RqRing>(q->rq_off_)->max_wr = c.max_recv_wr;
  }
  q->rq_ = has_rq ? ctx->seg().at<RqRing>(q->rq_off_) : nullptr;
  QpShm* s = q->shm_;
  s->qp_type = uint32_t(a.type);
  s->pd_id = a.pd_id;
  s->rq_off = q->rq_off_;
  s->recv_cq_off = a.recv_cq ? a.recv_cq->off() : 0;
  s->xrcd_id = a.xrcd_id;
  s->has_srq = a.srq ? 1 : 0;
  s->owner_pid = getpid();
  s->owner_ctx_id = ctx->async_id();
  s->user_handle = a.user_handle;
  s->state.store(uint32_t(QpState::kReset));
  q->qpn_ = slot->qpn;
  s->qpn = q->qpn_;
  s->eager_off = 0;
  if (has_rq && !a.srq && (a.type == QpType::kRc || a.type == QpType::kUc)) q->eager_create();
  std::atomic_thread_fence(std::memory_order_release);
  s->magic = kQpMagic;
  q->local_id_ = table_insert(q.get());
  if (!q->local_id_) return Status(ENOMEM);
  if (a.send_cq) a.send_cq->refs++;
  if (a.recv_cq) a.recv_cq->refs++;
  if (a.srq) a.srq->refs++;
  q->attr_.cap = q->cap_;
  if (a.rss) q->rss_ = std::make_unique<RssConfig>(*a.rss);
  if (raw) {
    // Frames from the wire come through the engine's AF_XDP ports.
    if (Status st = NetEngine::get().add_raw(); !st.is_ok()) return st;
    q->raw_user_ = true;
    // Its frames counted where uroced and `uroce stat` see them, for its
    // whole life (none if the segment is full: the QP works without).
    if (auto k = ctx->open_counters(); k.is_ok()) {
      q->counters_ = k.value();
      s->counters_off.store(uint64_t(reinterpret_cast<uint8_t*>(q->counters_) - ctx->seg().base()),
                            std::memory_order_release);  // pairs with uroced's acquire
    }
  }
  if (raw && has_sq) {
    const DeviceInfo& d = ctx->dev();
    // The longest frame: the MTU, an Ethernet header and one VLAN tag.
    q->raw_engine_ = std::make_unique<RawEngine>(static_cast<QpOwner&>(*q), d.ifindex, q->qpn_, d.if_mtu + 18,
                                                 NetEngine::get().xdp_port(d, ctx->ctl()),
                                                 q->counters_ ? &q->counters_->raw : nullptr);
    // What waits in its send queue (paced, or a full ring) leaves from the
    // engine's polls.
    NetEngine::get().add_raw_queue(q->raw_engine_.get());
  } else if (!xrc_tgt && !raw)
    q->shm_engine_ = std::make_unique<ShmEngine>(ctx, static_cast<QpOwner&>(*q), q->sq_mu_, q->attr_,
                                                 q->type_, q->qpn_, q->shm_);
  return q;
}

Result<std::unique_ptr<Qp>> Qp::open_xrc_target(Context* ctx, uint32_t qpn, uint32_t xrcd_id) {
  // Like the kernel: an unknown QPN, another type or another domain is EINVAL.
  auto p = PeerMap::get().resolve(qpn);
  if (!p.is_ok() || p->qp->qp_type != uint32_t(QpType::kXrcRecv) || p->qp->xrcd_id != xrcd_id)
    return Status(EINVAL);
  std::unique_ptr<Qp> q(new Qp());
  q->ctx_ = ctx;
  q->shm_ = p->qp;
  q->opened_from_ = p->seg;
  q->qpn_ = qpn;
  q->type_ = QpType::kXrcRecv;
  q->attr_.access_flags = p->qp->access_flags;
  q->attr_.min_rnr_timer = uint8_t(p->qp->min_rnr_timer);
  q->attr_.dest_qpn = p->qp->dest_qpn;
  q->attr_.port_num = 1;
  return q;
}

bool Qp::exists() const {
  return !opened_from_ ||
         (seg_owner_alive(opened_from_->header()) && shm_->magic == kQpMagic && shm_->qpn == qpn_);
}

Qp::~Qp() {
  if (opened_from_) return;  // a handle from ibv_open_qp owns nothing
  net_close();
  if (type_ == QpType::kRawPacket) {
    link::XdpPort* port = wire_port();
    for (uint64_t h : RawSwitch::get().remove_qp(qpn_)) (void)wire_rule(port, h, nullptr);
  }
  if (raw_engine_) NetEngine::get().remove_raw_queue(raw_engine_.get());
  if (raw_user_) NetEngine::get().remove_raw();
  raw_engine_.reset();
  retire_counters();  // a raw QP's: no rule or engine counts into them any more
  if (shm_engine_) Service::get().remove(shm_engine_.get());
  if (local_id_) slot(local_id_).store(nullptr, std::memory_order_release);
  if (shm_) {
    shm_->state.store(uint32_t(QpState::kReset));
    shm_->magic = 0;
  }
  if (eager_place_ >= 0) recv_cq_->eager_detach(eager_place_);
  // As mlx5 does at destroy (__mlx5_cq_clean): the completions still queued
  // for this QP go with it, so no one polls a wr_id of a QP that is gone
  // (libfabric's rxm closes a connection's endpoint, then drains the CQ and
  // reposts every receive it finds there on that endpoint).
  uint32_t dropped = 0;
  if (qpn_ && send_cq_) dropped += send_cq_->purge_qp(qpn_);
  if (qpn_ && recv_cq_ && recv_cq_ != send_cq_) dropped += recv_cq_->purge_qp(qpn_);
  if (qpn_ && tracing()) trace(qpn_, "destroyed (%u completions dropped)", dropped);
  if (qpn_) ctx_->ctl()->free_qpn(qpn_);
  if (send_cq_ && qpn_) send_cq_->refs--;
  if (recv_cq_ && qpn_) recv_cq_->refs--;
  if (srq_ && qpn_) srq_->refs--;
  if (!srq_ && rq_off_) ctx_->seg().free(rq_off_, rq_bytes_);
  if (eager_off_) ctx_->seg().free(eager_off_, eager_bytes_);
  if (shm_off_) ctx_->release_qp_slot(shm_chunk_);
}

Status Qp::modify(const QpModifyArgs& a, uint32_t mask) {
  Guard<AdaptiveLock> g(sq_mu_);
  if (!exists()) return Status(ENODEV);
  QpState cur = state();
  if ((mask & qp_attr::kCurState) && a.cur_state != cur) {
    // IBA allows naming the current state only if it matches (SQE/RTS nuances aside).
    if (!(a.cur_state == QpState::kSqe || a.cur_state == QpState::kRts)) return Status(EINVAL);
  }
  mask &= ~ignored_attrs(type_);
  QpState next = (mask & qp_attr::kState) ? a.state : cur;
  if (!modify_is_ok(type_, cur, next, mask)) return Status(EINVAL);
  using namespace qp_attr;
  if ((mask & kPort) && a.port_num != 1) return Status(EINVAL);
  if ((mask & kPkeyIndex) && a.pkey_index != 0) return Status(EINVAL);
  if ((mask & kPathMtu) && (a.path_mtu < 1 || a.path_mtu > 5)) return Status(EINVAL);
  if ((mask & kMaxQpRdAtomic) && a.max_rd_atomic > kLimits.max_qp_init_rd_atom) return Status(EINVAL);
  if ((mask & kMaxDestRdAtomic) && a.max_dest_rd_atomic > kLimits.max_qp_rd_atom) return Status(EINVAL);
  if ((mask & kTimeout) && a.timeout > 31) return Status(EINVAL);
  if ((mask & kRetryCnt) && a.retry_cnt > 7) return Status(EINVAL);
  if ((mask & kRnrRetry) && a.rnr_retry > 7) return Status(EINVAL);
  if ((mask & kMinRnrTimer) && a.min_rnr_timer > 31) return Status(EINVAL);
  if ((mask & kDestQpn) && a.dest_qpn > 0xffffff) return Status(EINVAL);
  // A RoCE port addresses by GID: an address vector without a global route
  // is refused, as the kernel (rxe) and mlx5 refuse it.
  if ((mask & kAv) && type_ != QpType::kRawPacket &&
      (!a.av.is_global || a.av.sgid_index >= ctx_->dev().num_gids))
    return Status(EINVAL);
  if (mask & kAccessFlags) {
    attr_.access_flags = a.access_flags;
    shm_->access_flags = a.access_flags;
  }
  if (mask & kPkeyIndex) attr_.pkey_index = a.pkey_index;
  if (mask & kPort) attr_.port_num = a.port_num;
  if (mask & kQkey) {
    attr_.qkey = a.qkey;
    shm_->qkey = a.qkey;
  }
  if (mask & kAv) attr_.av = a.av;
  if (mask & kPathMtu) attr_.path_mtu = a.path_mtu;
  if (mask & kTimeout) attr_.timeout = a.timeout;
  if (mask & kRetryCnt) attr_.retry_cnt = a.retry_cnt;
  if (mask & kRnrRetry) attr_.rnr_retry = a.rnr_retry;
  if (mask & kRqPsn) attr_.rq_psn = a.rq_psn & 0xffffff;
  if (mask & kSqPsn) attr_.sq_psn = a.sq_psn & 0xffffff;
  if (mask & kMaxQpRdAtomic) attr_.max_rd_atomic = a.max_rd_atomic;
  if (mask & kMaxDestRdAtomic) attr_.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & kMinRnrTimer) {
    attr_.min_rnr_timer = a.min_rnr_timer;
    shm_->min_rnr_timer = a.min_rnr_timer;
  }
  if (mask & kDestQpn) {
    attr_.dest_qpn = a.dest_qpn;
    shm_->dest_qpn = a.dest_qpn;
    if (shm_engine_) shm_engine_->forget_peer();
  }
  if (mask & kEnSqdAsyncNotify) attr_.en_sqd_async_notify = a.en_sqd_async_notify;
  if ((mask & kRateLimit) && type_ == QpType::kRawPacket) {
    if (Status s = set_rate_limit(a.rate_limit, 0); !s.is_ok()) return s;
  }
  if (next == QpState::kRtr && cur == QpState::kInit &&
      wants_network(ctx_->dev(), type_, attr_.av, qpn_, attr_.dest_qpn, ctx_->ctl())) {
    if (Status s = net_open(); !s.is_ok()) return s;
    if (eager_place_ >= 0) {
      // Its messages come over the network: the ring is closed for good.
      eager_->limit.store(0, std::memory_order_release);
      recv_cq_->eager_detach(eager_place_);
      Guard<SpinLock> r(rq_mu_);
      eager_place_ = -1;
    }
  }
  if (tracing())
    trace(qpn_, "state %s -> %s%s", qp_state_name(cur), qp_state_name(next), net_ ? " (network link)" : "");
  if (next == cur) return Status::ok();
  if (next == QpState::kReset) {
    net_close();
    // Back to a clean queue: drop posted receives, deferred sends and the
    // completions still queued for this QP silently.
    if (shm_engine_) shm_engine_->reset();
    if (raw_engine_) raw_engine_->reset();
    last_wqe_raised_.store(false, std::memory_order_relaxed);
    if (send_cq_) send_cq_->purge_qp(qpn_);
    if (recv_cq_ && recv_cq_ != send_cq_) recv_cq_->purge_qp(qpn_);
    if (rq_ && !srq_) {
      uint64_t tail;
      {
        Guard<SpinLock> r(rq_mu_);
        tail = rq_->tail.load();
        rq_->head.store(tail);
        rq_head_seen_ = tail;
        if (eager_place_ >= 0) {
          eager_limit_ = kEagerPayload + 1;
          eager_->limit.store(eager_limit_, std::memory_order_release);
        }
      }
      if (eager_place_ >= 0) recv_cq_->eager_reset(eager_place_, tail);
    }
    sq_posted_.store(sq_retired_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  // The one store of a transition ibv_modify_qp asks for (an error's move
  // to ERR is qp_enter_error's: to_error).
  shm_->state.store(uint32_t(next), std::memory_order_release);
  if (net_ && next == QpState::kRts && cur == QpState::kRtr) net_->start(attr_);
  if (next == QpState::kErr) flush_all();
  if (next == QpState::kSqd && cur != QpState::kSqd) {
    // What had begun finishes (a network requester's ACKs may be on the
    // way) and the engine says when; new work waits.
    sqd_notify_.store(attr_.en_sqd_async_notify != 0, std::memory_order_relaxed);
    if (shm_engine_ || raw_engine_)
      send_engine().drain(true);
    else
      drained();  // an XRC target QP sends nothing
  }
  if (next == QpState::kRts && cur == QpState::kSqd && (shm_engine_ || raw_engine_))
    send_engine().drain(false);
  return Status::ok();
}

QpModifyArgs Qp::query() {
  Guard<AdaptiveLock> g(sq_mu_);
  QpModifyArgs a = attr_;
  // What another handle of the same QP may have changed (ibv_open_qp) lives in the shared part.
  a.access_flags = shm_->access_flags;
  a.min_rnr_timer = uint8_t(shm_->min_rnr_timer);
  a.dest_qpn = shm_->dest_qpn;
  a.state = state();
  a.cur_state = a.state;
  a.cap = cap_;
  return a;
}

void Qp::to_error(const QpFailure& f) {
  const bool moved = qp_enter_error(*shm_);
  if (moved && tracing()) trace(qpn_, "state -> ERR (%s)", f.why);
  flush_rq();
  if (moved && f.responder) {
    NotifyMsg m{kNotifyAsync, uint32_t(f.event), shm_->user_handle};
    notify_post(getpid(), ctx_->async_id(), m);
  }
}

void Qp::flush_all() {
  if (net_) net_->flush();
  if (shm_engine_) shm_engine_->flush();
  if (raw_engine_) raw_engine_->flush();
  flush_rq();
}

}  // namespace uroce::core
