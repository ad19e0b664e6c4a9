// The send side of a QP: what ibv_post_send checks before a WQE goes to its
// link's engine, the checks that are the QP's whichever engine asks (local
// keys, local operations), the one place a send completion is made, and
// the QP's network engine from RTR to its close.
#include <unistd.h>

#include "contract/limits.h"
#include "core/qp.h"
#include "link/ip_addr.h"
#include "memory/notify.h"
#include "memory/trace.h"
#include "net/net_engine.h"
#include "net/net_qp.h"
#include "net/net_route.h"

namespace uroce::core {

namespace {

/// WR opcode legality per QP type (IBA 10.7.3 / rdma-core man ibv_post_send).
bool opcode_ok(QpType t, WrOpcode op) {
  switch (op) {
    case WrOpcode::kSend:
      return true;
    case WrOpcode::kSendWithImm:
      return t != QpType::kRawPacket;  // a frame has no room for immediate data
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return t == QpType::kRc || t == QpType::kUc || t == QpType::kXrcSend;
    case WrOpcode::kRdmaRead:
    case WrOpcode::kAtomicCmpAndSwp:
    case WrOpcode::kAtomicFetchAndAdd:
    case WrOpcode::kSendWithInv:
    case WrOpcode::kAtomicWrite:
      return t == QpType::kRc || t == QpType::kXrcSend;
    case WrOpcode::kBindMw:
    case WrOpcode::kLocalInv:
      // Memory windows are bound and invalidated through connected QPs.
      return t == QpType::kRc || t == QpType::kUc || t == QpType::kXrcSend;
    default:
      return false;
  }
}

/// An IPv4-mapped GID of a multicast address (224.0.0.0/4).
bool v4_multicast(const uint8_t* gid, uint32_t* ip) {
  const link::IpAddr a = link::IpAddr::of_gid(gid, 0);
  *ip = a.ip4();
  return a.is_v4() && a.multicast();
}

}  // namespace

Status Qp::post_send(const SendWqe& w) {
  if (tracing()) {
    uint64_t len = 0;
    for (uint32_t i = 0; i < w.num_sge; ++i) len += w.sge[i].length;
    trace(qpn_, "post_send wr_id=%llu %s len=%llu%s%s", (unsigned long long)w.wr_id, wr_opcode_name(w.opcode),
          (unsigned long long)len, w.flags & send_flags::kSignaled ? " signaled" : "",
          w.flags & send_flags::kInline ? " inline" : "");
  }
  Guard<AdaptiveLock> g(sq_mu_);
  if (!send_cq_) return Status(EINVAL);  // XRC target QPs have no send queue
  QpState st = state();
  if (st == QpState::kReset || st == QpState::kInit || st == QpState::kRtr) return Status(EINVAL);
  if (w.num_sge > cap_.max_send_sge) return Status(EINVAL);
  if (!opcode_ok(type_, w.opcode)) return Status(EINVAL);
  if (type_ == QpType::kUd && !w.av) return Status(EINVAL);
  // Checksum offload: the device does not advertise IBV_DEVICE_RAW_IP_CSUM
  // (mlx5 answers EINVAL to a QP without it).
  if (w.flags & send_flags::kIpCsum) return Status(EINVAL);
  if (w.flags & send_flags::kInline) {
    if (is_atomic(w.opcode) || w.opcode == WrOpcode::kRdmaRead) return Status(EINVAL);
    uint64_t len = 0;
    for (uint32_t i = 0; i < w.num_sge; ++i) len += w.sge[i].length;
    if (len > cap_.max_inline_data) return Status(EINVAL);
  }
  const uint32_t posted = sq_posted_.load(std::memory_order_relaxed);
  if (posted - sq_retired_.load(std::memory_order_relaxed) >= cap_.max_send_wr) return Status(ENOMEM);
  sq_posted_.store(posted + 1, std::memory_order_relaxed);
  engine_for(w).post(w);
  return Status::ok();
}

LinkEngine& Qp::engine_for(const SendWqe& w) {
  if (raw_engine_) return *raw_engine_;
  if (net_ && (type_ != QpType::kUd || net_->takes(*w.av))) return *net_;
  return *shm_engine_;
}

LinkEngine& Qp::send_engine() {
  if (raw_engine_) return *raw_engine_;
  // A UD QP's network sends complete as they leave: its intra-host engine
  // is the one that may hold work.
  if (net_ && type_ != QpType::kUd) return *net_;
  return *shm_engine_;
}

WcStatus Qp::check_local(const SendWqe& w, iovec* loc, size_t* nlp, uint64_t* lenp) {
  sq_mu_.assert_held();  // the engines call it under the QP's send lock
  size_t nl = 0;
  uint64_t len = 0;
  const bool needs_local_write = w.opcode == WrOpcode::kRdmaRead || is_atomic(w.opcode);
  for (uint32_t i = 0; i < w.num_sge; ++i) {
    const Sge& s = w.sge[i];
    if (s.length == 0) continue;
    if (w.flags & send_flags::kInline) {
      loc[nl++] = iovec{reinterpret_cast<void*>(s.addr), s.length};
    } else {
      const MrView* mr = mr_read_cached(ctx_->mr_entry(s.lkey), s.lkey, &local_mr_cache_);
      // (A window's key is an R_Key only: never a local key, IBA 10.6.7.)
      if (!mr || mr->pd_id != pd_id_ || !mr_contains(*mr, s.addr, s.length) ||
          (mr->access & access::kWindow) || (needs_local_write && !(mr->access & access::kLocalWrite)))
        return WcStatus::kLocProtErr;
      loc[nl++] = iovec{reinterpret_cast<void*>(mr->vaddr + (s.addr - mr->iova)), s.length};
    }
    len += s.length;
  }
  *nlp = nl;
  *lenp = len;
  if (len > kLimits.max_msg_sz) return WcStatus::kLocLenErr;
  if (type_ == QpType::kUd && len > mtu_enum_to_bytes(active_mtu_enum(ctx_->dev().if_mtu)))
    return WcStatus::kLocLenErr;
  if (is_atomic(w.opcode) && (nl == 0 || loc[0].iov_len < 8)) return WcStatus::kLocLenErr;
  if (w.opcode == WrOpcode::kAtomicWrite && len != 8) return WcStatus::kLocLenErr;  // exactly 8 bytes
  return WcStatus::kSuccess;
}

WcStatus Qp::local_op(const SendWqe& w) {
  if (w.opcode == WrOpcode::kLocalInv) return ctx_->local_invalidate(w.imm, pd_id_);
  return ctx_->bind_window(w.bind, pd_id_, qpn_);
}

void Qp::completed(uint64_t wr_id, WcOpcode op, WcStatus st, uint32_t byte_len, bool signaled,
                   uint32_t* unsignaled) {
  signaled = signaled || sq_sig_all_;
  if (tracing())
    trace(qpn_, "send completion wr_id=%llu %s %s len=%u%s", (unsigned long long)wr_id, wc_opcode_name(op),
          wc_status_str(uint32_t(st)), byte_len, signaled ? "" : " (unsignaled: no CQE)");
  if (st != WcStatus::kSuccess && st != WcStatus::kWrFlushErr) {
    // An error completion means the QP is in ERR (IBA 10.8.3): whoever polls
    // it and then queries the QP must find ERR, so the state goes first.
    if (qp_enter_error(*shm_) && tracing()) trace(qpn_, "state -> ERR (error completion)");
  }
  if (!signaled) {
    ++*unsignaled;
    return;
  }
  Cqe c{};
  c.wr_id = wr_id;
  c.status = uint32_t(st);
  c.opcode = uint32_t(op);
  c.byte_len = byte_len;
  c.qp_num = qpn_;
  c.local_qp = local_id_;
  c.sq_retire = *unsignaled + 1;  // this WQE and the unsignaled ones before it
  *unsignaled = 0;
  send_cq_->push_local(c, true);
}

void Qp::drained() {
  if (!sqd_notify_.load(std::memory_order_relaxed)) return;
  NotifyMsg m{kNotifyAsync, uint32_t(AsyncEvent::kSqDrained), shm_->user_handle};
  notify_post(getpid(), ctx_->async_id(), m);
}

Status Qp::net_open() {
  NetQp::Setup s;
  s.type = type_;
  s.qpn = qpn_;
  s.dev = &ctx_->dev();
  s.ctl = ctx_->ctl();
  s.host = ctx_->host();
  s.attr = &attr_;
  // The QP's own shared state, as the target-side helpers see any QP's.
  s.self.seg = ctx_->seg().view();
  s.self.qp = shm_;
  s.self.qpn = qpn_;
  s.self.rq = rq_;
  s.self.rcq = recv_cq_ ? ctx_->seg().at<CqRing>(recv_cq_->off()) : nullptr;
  s.groups = &mcast_;
  // Counters where uroced and `uroce stat` see them (none if the segment is
  // full: the QP works without).
  if (auto k = ctx_->open_counters(); k.is_ok()) counters_ = s.counters = k.value();
  auto q = NetQp::open(s, this);
  if (!q.is_ok()) {
    net_close();
    return Status(q.err());
  }
  net_ = std::move(q.value());
  shm_->link.store(uint32_t(net_->link()), std::memory_order_relaxed);
  if (counters_)
    shm_->counters_off.store(uint64_t(reinterpret_cast<uint8_t*>(counters_) - ctx_->seg().base()),
                             std::memory_order_release);  // pairs with uroced's acquire
  return Status::ok();
}

void Qp::net_close() {
  if (type_ == QpType::kRawPacket) return;  // no network link; its counters live as long as it
  if (!net_ && !counters_) return;
  if (net_) {
    net_->close(!ctx_->fatal());
    net_.reset();
  }
  shm_->link.store(uint32_t(QpLink::kShm), std::memory_order_relaxed);
  retire_counters();
}

void Qp::retire_counters() {
  if (!counters_) return;
  shm_->counters_off.store(0, std::memory_order_release);
  ctx_->retire_counters(counters_);
  counters_ = nullptr;
}

Status Qp::attach_mcast(const uint8_t gid[16]) {
  Guard<AdaptiveLock> g(sq_mu_);
  if (type_ == QpType::kRawPacket) return raw_attach(gid);
  uint32_t group;
  if (type_ != QpType::kUd || !v4_multicast(gid, &group)) return Status(EINVAL);
  // Groups are joined on the network (the kernel copies each datagram to
  // every member socket of the host); a QP the shared-memory link alone
  // serves (the loopback device, UROCE_LINK unset) has no socket to join.
  if (!ud_on_network(ctx_->dev())) return Status(EOPNOTSUPP);
  for (uint32_t x : mcast_)
    if (x == group) return Status::ok();
  if (mcast_.size() >= kLimits.max_mcast_grp) return Status(ENOMEM);
  if (net_)
    if (Status s = net_->join(group); !s.is_ok()) return s;
  mcast_.push_back(group);
  return Status::ok();
}

Status Qp::detach_mcast(const uint8_t gid[16]) {
  Guard<AdaptiveLock> g(sq_mu_);
  if (type_ == QpType::kRawPacket) return raw_detach(gid);
  uint32_t group;
  if (type_ != QpType::kUd || !v4_multicast(gid, &group)) return Status(EINVAL);
  for (auto it = mcast_.begin(); it != mcast_.end(); ++it)
    if (*it == group) {
      if (net_) net_->leave(group);
      mcast_.erase(it);
      return Status::ok();
    }
  return Status(EINVAL);
}

bool Qp::mcast_attached() {
  Guard<AdaptiveLock> g(sq_mu_);
  return !mcast_.empty() || !raw_groups_.empty();
}

}  // namespace uroce::core
