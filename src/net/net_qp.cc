#include "net/net_qp.h"

#include <cstring>

#include "common/clock.h"
#include "common/iov.h"
#include "common/log.h"
#include "contract/limits.h"
#include "link/shm_link.h"
#include "memory/target.h"
#include "memory/trace.h"
#include "net/net_engine.h"
#include "net/net_route.h"
#include "net/ud_forward.h"
#include "wire/grh.h"
#include "wire/ip_udp.h"  // kRoceV2Port

namespace uroce::core {

/// A call that may send, complete or move the requester's deadline: holds
/// the lock, lets what it sends leave together when it returns (a message's
/// packets as one UDP GSO send, a reply and an ACK in one sendmmsg:
/// UdpEndpoint::cork), tells the owner of a requester's failure once its
/// completions are all out, traces a change of the congestion window, and
/// publishes the deadline and whether the window is full for lock-free
/// readers.
class SCOPED_CAPABILITY NetQp::Call {
 public:
  // (The bodies are the lock's own: not analysed.)
  explicit Call(NetQp* q) ACQUIRE(q->mu_) NO_THREAD_SAFETY_ANALYSIS : q_(q) {
    q_->mu_.lock();
    q_->tx_->cork();
    ++q_->calls_;
  }
  ~Call() RELEASE() NO_THREAD_SAFETY_ANALYSIS {
    if (q_->req_failed_) {
      // The failed WQE's error and the rest's flushes are out: the
      // receives flush after them (a program that stops at the first bad
      // completion sees the cause, not a flush).
      q_->req_failed_ = false;
      q_->owner_->failed(QpFailure{false, AsyncEvent::kQpFatal, "requester error"});
    }
    q_->trace_window();
    q_->tx_->uncork();
    if (--q_->calls_ == 0 && q_->xdp_) q_->xdp_->flush();  // the frames of the call leave together
    q_->deadline_.store(q_->req_ && !q_->flushed_ ? q_->req_->next_deadline() : UINT64_MAX,
                        std::memory_order_relaxed);
    q_->window_full_.store(q_->req_ && !q_->flushed_ && q_->req_->window_full(), std::memory_order_relaxed);
    q_->mu_.unlock();
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

 private:
  NetQp* q_;
};

uint16_t udp_sport(uint32_t flow_label, uint32_t lqpn, uint32_t rqpn) {
  uint32_t fl = flow_label & 0xfffff;
  if (!fl) {
    // The flow label Linux derives from the QPN pair (rdma_calc_flow_label):
    // their product with its high bits folded into the low 20.
    uint64_t v = uint64_t(lqpn) * rqpn;
    v ^= v >> 20;
    v ^= v >> 40;
    fl = uint32_t(v & 0xfffff);
  }
  // 20 bits into 14: the top 6 folded onto the low ones, in 0xC000..0xFFFF.
  return uint16_t(((fl & 0x3fff) ^ (fl >> 14)) | 0xc000);
}

/// The machines' environment: the QP's own memory and queues through the
/// target-side helpers of the intra-host link, run by the owner on itself;
/// completions and failures to the owner.
class NetQp::Env final : public transport::ResponderEnv, public transport::RequesterEnv {
 public:
  explicit Env(NetQp* q) : q_(q) {}

  /// XRC target: the SRQ the packet being handled names (its XRCETH).
  void set_srqn(uint32_t srqn) { srqn_ = srqn; }

  bool claim_recv(transport::RecvTarget* out) override {
    const uint32_t slot = next_++ & 1;
    out->handle = slot;
    out->wr_id = 0;
    claimed_srqn_[slot] = srqn_;
    claimed_bad_[slot] = false;
    Rx x;
    if (!rx_of(q_->self_, srqn_, &x)) {
      // An XRC SEND naming no SRQ of the target's domain: its packets are
      // refused as invalid requests (place_recv), not answered with RNR.
      claimed_bad_[slot] = true;
      return true;
    }
    if (!core::claim_recv(q_->self_, x, &claimed_[slot], nullptr)) return false;
    out->wr_id = claimed_[slot].wr_id;
    return true;
  }

  transport::Access place_recv(const transport::RecvTarget& r, uint64_t offset,
                               std::span<const uint8_t> bytes) override {
    if (claimed_bad_[r.handle & 1]) return transport::Access::kInvalid;
    const ClaimedRecv& c = claimed_[r.handle & 1];
    Rx x;
    rx_of(q_->self_, claimed_srqn_[r.handle & 1], &x);
    uint64_t skip = offset;
    size_t done = 0;
    for (uint32_t i = 0; i < c.num_sge && done < bytes.size(); ++i) {
      const Sge& s = c.sge[i];
      if (skip >= s.length) {
        skip -= s.length;
        continue;
      }
      const uint64_t n = std::min<uint64_t>(s.length - skip, bytes.size() - done);
      MrView buf;
      const MrView* mr = target_mr(x, s.lkey, s.addr + skip, n, access::kLocalWrite, &buf);
      if (!mr) return transport::Access::kAccessError;
      // The QP's own memory; an XRC SRQ's may be another process's.
      const uint64_t va = mr->vaddr + (s.addr + skip - mr->iova);
      if (uint8_t* at = mapped(x, *mr, s.lkey, va, n)) {
        memcpy(at, bytes.data() + done, n);
      } else {
        iovec from{const_cast<uint8_t*>(bytes.data() + done), n};
        iovec to{reinterpret_cast<void*>(va), n};
        if (link::copy_to_peer(x.seg->pid, &from, 1, &to, 1) != 0) return transport::Access::kAccessError;
      }
      done += n;
      skip = 0;
    }
    return done == bytes.size() ? transport::Access::kOk : transport::Access::kLengthError;
  }

  void complete_recv(const transport::RecvTarget& r, WcStatus st, uint32_t byte_len,
                     const transport::RecvInfo& info) override {
    Rx x;
    if (claimed_bad_[r.handle & 1] || !rx_of(q_->self_, claimed_srqn_[r.handle & 1], &x)) return;
    Cqe c = recv_cqe(q_->self_, r.wr_id, st);
    if (st == WcStatus::kSuccess) {
      c.opcode = uint32_t(info.opcode);
      c.byte_len = byte_len;
      c.src_qp = info.src_qp;
      if (info.has_imm) {
        c.imm = info.imm;
        c.wc_flags |= wc_flags::kWithImm;
      } else if (info.has_inv) {
        c.imm = info.inv_rkey;
        c.wc_flags |= wc_flags::kWithInv;
      }
      if (info.with_grh) c.wc_flags |= wc_flags::kGrh;
      c.sl = info.sl;
    }
    push_cqe(x, c, info.solicited || st != WcStatus::kSuccess);
  }

  bool invalidate(uint32_t rkey) override {
    Rx x;
    return rx_of(q_->self_, srqn_, &x) && revoke_window(x, rkey);
  }

  uint8_t* remote_memory(uint32_t rkey, uint64_t va, uint64_t len, uint32_t need) override {
    if ((q_->self_.qp->access_flags & need) != need) return nullptr;  // the QP's own rights (IBA 10.2.4)
    Rx x;
    if (!rx_of(q_->self_, srqn_, &x)) return nullptr;
    MrView buf;
    const MrView* mr = target_mr(x, rkey, va, len, need, &buf);
    if (!mr) return nullptr;
    // (An XRC target's memory in another process than the QP's is out of
    // reach here: refused as an access error.)
    return mapped(x, *mr, rkey, mr->vaddr + (va - mr->iova), len);
  }

  uint64_t atomic(uint8_t* at, bool cas, uint64_t compare_add, uint64_t swap) override {
    // Atomic against every other RDMA atomic of the host (IBV_ATOMIC_HCA).
    uint64_t orig = 0;
    link::atomic_on_peer(
        q_->host_->stripes, link::self_pid(), reinterpret_cast<uint64_t>(at), reinterpret_cast<uint64_t*>(at),
        cas ? link::AtomicOp::kCmpSwap : link::AtomicOp::kFetchAdd, compare_add, swap, &orig);
    return orig;
  }

  void atomic_store(uint8_t* at, uint64_t v) override {
    uint64_t orig = 0;
    link::atomic_on_peer(q_->host_->stripes, link::self_pid(), reinterpret_cast<uint64_t>(at),
                         reinterpret_cast<uint64_t*>(at), link::AtomicOp::kStore, 0, v, &orig);
  }

  // The machines call these within a Call (the lock held).
  void send(wire::Packet& p) override REQUIRES(q_->mu_) {
    if (tracing()) trace_packet(q_->qpn_, true, p);
    q_->send(p);
  }
  // The responder met an error (IBA 9.9.3): the QP goes to ERR at once
  // (its receives flushed, the event raised); what the requester still
  // holds ends with WR_FLUSH_ERR after that.
  void qp_error(AsyncEvent ev) override REQUIRES(q_->mu_) {
    q_->owner_->failed(QpFailure{true, ev, "responder error"});
    q_->stop();
    if (q_->req_ && !q_->req_->failed()) q_->req_->flush();
  }
  void complete(const transport::SqWqe& w, WcStatus st, uint32_t byte_len) override REQUIRES(q_->mu_) {
    q_->complete(w, st, byte_len);
  }
  // The requester fails: it completes its failed WQE and flushes the rest
  // next; the owner hears of it at the end of the call (Call).
  void qp_error() override REQUIRES(q_->mu_) {
    q_->stop();
    q_->req_failed_ = true;
  }
  void sq_drained() override { q_->owner_->drained(); }

 private:
  NetQp* q_;
  ClaimedRecv claimed_[2];  // a SEND in progress and a WRITE_WITH_IMM's receive at most
  uint32_t claimed_srqn_[2] = {};
  bool claimed_bad_[2] = {};
  uint32_t srqn_ = 0;
  uint32_t next_ = 0;
};

NetQp::NetQp() : env_(std::make_unique<Env>(this)) {}

NetQp::~NetQp() {
  // What the QP's link did, for diagnosis (UROCE_LOG=info; `uroce stat`
  // shows the same while the QP lives).
  if (!counters_ || log_level() < LogLevel::kInfo) return;
  std::string line;
  for (const CounterField& f : net_counter_fields())
    if (const uint64_t v = counter_at(*counters_, f))
      line += " " + std::string(f.name) + "=" + std::to_string(v);
  UROCE_INFO("QP %u on UDP:%s", qpn_, line.c_str());
}

void NetQp::make_responder() {
  transport::ResponderConfig rc = resp_cfg_;
  rc.pmtu = pmtu_;
  if (type_ == QpType::kUd)
    ud_resp_ = std::make_unique<transport::UdResponder>(self_.qp->qkey, env_.get());
  else if (type_ == QpType::kUc)
    uc_resp_ = std::make_unique<transport::UcResponder>(rc, env_.get());
  else if (type_ == QpType::kRc || type_ == QpType::kXrcRecv) {
    rc.xrc = type_ == QpType::kXrcRecv;
    // What arrives past a gap waits for it (selective repeat): a uroce
    // requester that asked (ask_caps) then resends the gap alone.
    if (NetEngine::get().settings().selective) rc.keep_ooo = kKeepOooPsns;
    rc_resp_ = std::make_unique<transport::RcResponder>(rc, env_.get());
  }  // (an XRC initiator has no receive side: requests to it are dropped)
  if (NetCounters* k = counters_) {
    if (ud_resp_) ud_resp_->count_into(&k->ud);
    if (uc_resp_) uc_resp_->count_into(&k->uc);
    if (rc_resp_) rc_resp_->count_into(&k->resp);
    cnp_.count_into(&k->np);
  }
}

void NetQp::start(const QpModifyArgs& a) {
  // UD sends complete as they go out; an XRC target QP has no send queue.
  if (type_ == QpType::kUd || type_ == QpType::kXrcRecv) return;
  Call call(this);
  transport::RequesterConfig rc;
  rc.dest_qp = a.dest_qpn;
  rc.sq_psn = a.sq_psn;
  rc.timeout_ns = ack_timeout_ns(a.timeout);
  rc.retry_cnt = a.retry_cnt;
  rc.rnr_retry = a.rnr_retry;
  rc.max_rd_atomic = a.max_rd_atomic ? a.max_rd_atomic : 1;
  rc.pmtu = pmtu_;
  rc.unreliable = type_ == QpType::kUc;
  rc.xrc = type_ == QpType::kXrcSend;
  rc.cc = NetEngine::get().settings().cc;
  rc.reorder_ns = NetEngine::get().settings().reorder_ns;
  req_ = std::make_unique<transport::RcRequester>(rc, env_.get());
  if (counters_) {
    req_->count_into(&counters_->req);
    req_->count_into(&counters_->cc, &counters_->cc_now);
  }
  peer_qpn_ = a.dest_qpn;
}

void NetQp::complete(const transport::SqWqe& w, WcStatus st, uint32_t byte_len) {
  const bool ok = st == WcStatus::kSuccess;
  owner_->completed(w.wr_id, wc_opcode_of(w.kind), st, ok ? byte_len : 0, w.signaled || !ok, &unsignaled_);
}

void NetQp::post(const SendWqe& w) {
  if (type_ == QpType::kUd) {
    post_ud(w);
    return;
  }
  iovec loc[kLimits.max_sge];
  size_t nl = 0;
  uint64_t len = 0;
  transport::SqWqe q;
  q.wr_id = w.wr_id;
  q.kind = msg_kind_of(w.opcode);
  q.signaled = w.flags & send_flags::kSignaled;
  q.solicited = w.flags & send_flags::kSolicited;
  q.fence = w.flags & send_flags::kFence;
  q.xrc_srqn = w.xrc_srqn;
  const QpState st = QpState(self_.qp->state.load(std::memory_order_acquire));
  if (st == QpState::kErr || st == QpState::kSqe) {
    Call call(this);
    q.signaled = true;
    complete(q, WcStatus::kWrFlushErr, 0);
    return;
  }
  // A local operation acts on the MR table at once and completes in order
  // behind what is in flight (RcRequester queues it without packets).
  const WcStatus ls =
      transport::is_local(q.kind) ? owner_->local_op(w) : owner_->check_local(w, loc, &nl, &len);
  if (ls != WcStatus::kSuccess) {
    // A local error completes at once and the QP goes to ERR (IBA 10.8.3.2).
    Call call(this);
    q.signaled = true;
    complete(q, ls, 0);
    stop();
    if (req_ && !req_->failed()) req_->flush();
    req_failed_ = true;  // the owner hears at the end of the call
    return;
  }
  q.len = uint32_t(len);
  if (w.flags & send_flags::kInline) {
    // Inline data belongs to the caller only during the call: keep a copy.
    q.owned.resize(len);
    iov_read({loc, nl}, 0, len, q.owned.data());
  } else {
    q.local.assign(loc, loc + nl);
  }
  q.remote_va = w.remote_addr;
  q.rkey = w.rkey;
  if (q.kind == transport::MsgKind::kSendInv)
    q.inv_rkey = w.imm;
  else
    q.imm = w.imm;
  q.compare_add = w.compare_add;
  q.swap = w.swap;
  NetEngine& e = NetEngine::get();
  e.app_posts();
  {
    Call call(this);
    if (!req_ || flushed_) {
      q.signaled = true;
      complete(q, WcStatus::kWrFlushErr, 0);
    } else {
      // The request first: it is what the peer waits for (a ping-pong's
      // reply); the held ACK (responder's, other direction) right after.
      const bool held = ack_held_;
      ack_held_ = false;  // the requester's packets must not send it first
      req_->post(std::move(q), fast_now_ns());
      if (held) transmit(held_ack_);
    }
  }
  e.kick(next_deadline());
}

bool NetQp::takes(const AddressVector& av) {
  return ud_dest_remote(*dev_, av, &ud_dst_cache_ip_, &ud_dst_cache_remote_);
}

void NetQp::post_ud(const SendWqe& w) {
  transport::SqWqe q;
  q.wr_id = w.wr_id;
  q.kind = msg_kind_of(w.opcode);
  q.signaled = w.flags & send_flags::kSignaled;
  iovec loc[kLimits.max_sge];
  size_t nl = 0;
  uint64_t len = 0;
  const QpState st = QpState(self_.qp->state.load(std::memory_order_acquire));
  WcStatus ls = st == QpState::kErr || st == QpState::kSqe ? WcStatus::kWrFlushErr
                                                           : owner_->check_local(w, loc, &nl, &len);
  uint8_t buf[kMaxUdPayload];
  if (ls == WcStatus::kSuccess && len > sizeof(buf)) ls = WcStatus::kLocLenErr;
  Guard<AdaptiveLock> g(mu_);
  if (ls != WcStatus::kSuccess) {
    complete(q, ls, 0);
    if (ls != WcStatus::kWrFlushErr)
      owner_->failed(QpFailure{false, AsyncEvent::kQpFatal, "error completion"});
    return;
  }
  iov_read({loc, nl}, 0, len, buf);
  const link::IpAddr dst = link::IpAddr::of_gid(w.av->dgid, dev_->ifindex);  // takes() checked it
  link::IpAddr src;
  if (w.av->sgid_index < dev_->num_gids)
    src = link::IpAddr::of_gid(dev_->gids[w.av->sgid_index], dev_->ifindex);
  // The work request's source address, else the first of dst's family.
  auto fits = [&dst](const link::IpAddr& a) { return a.is_v4() == dst.is_v4(); };
  link::UdpEndpoint* tx = nullptr;
  if (fits(src)) {
    if (local_ip_ == src) tx = tx_.get();
    for (const Address& a : more_)
      if (a.ip == src) tx = a.tx.get();
  }
  if (!tx && fits(local_ip_)) tx = tx_.get();
  for (const Address& a : more_)
    if (!tx && fits(a.ip)) tx = a.tx.get();
  // No address of the destination's family: the datagram is lost, as on a
  // port without such a GID (the send still completes: UD has no ACKs).
  if (tx) {
    wire::Packet p;
    p.bth.opcode = wire::opcode(wire::Service::kUd,
                                w.opcode == WrOpcode::kSendWithImm ? wire::kSendOnlyImm : wire::kSendOnly);
    p.bth.dest_qp = w.remote_qpn;
    p.bth.solicited = w.flags & send_flags::kSolicited;
    p.bth.psn = ud_psn_;
    ud_psn_ = (ud_psn_ + 1) & 0xffffff;
    p.qkey = ud_send_qkey(w.remote_qkey, self_.qp->qkey);
    p.src_qp = qpn_;
    p.imm = w.imm;
    p.payload = {buf, size_t(len)};
    (void)tx->send(p, link::UdpAddr{dst, wire::kRoceV2Port});  // failures are counted in its stats
  }
  complete(q, WcStatus::kSuccess, uint32_t(len));
}

void NetQp::on_packet(const wire::Packet& p, const link::UdpAddr& from, const link::UdpAddr& to) {
  if (tracing()) trace_packet(qpn_, false, p);
  Call call(this);
  if (flushed_) return;
  const QpState st = QpState(self_.qp->state.load(std::memory_order_acquire));
  if (p.bth.opcode == wire::kCnpOpcode) {
    if (req_) req_->on_cnp(fast_now_ns());
    return;
  }
  const wire::OpInfo* info = wire::op_info(p.bth.opcode);
  if (!info) return;
  if ((p.bth.opcode >> 5) == uint8_t(wire::Service::kUd) && type_ != QpType::kUd) {
    if (state_can_receive(st)) on_caps(p);
    return;
  }
  if (info->flags & wire::kRequest) {
    // IBA 10.3.1: a QP receives in RTR, RTS, SQD and SQE; before RTR it drops.
    if (!state_can_receive(st)) return;
    if (p.ce && (rc_resp_ || uc_resp_) && cnp_.on_marked(fast_now_ns())) {
      // A queue on the way filled: the requester hears it (DCQCN's CNP),
      // ahead of any ACK this packet causes.
      wire::Packet c = wire::cnp(resp_cfg_.dest_qp, p.bth.pkey);
      if (tracing()) trace_packet(qpn_, true, c);
      transmit(c);
    }
    in_packet_ = true;
    if (ud_resp_) {
      uint8_t grh[wire::kGrhBytes];
      ud_grh(p, from, to, grh);
      ud_resp_->set_qkey(self_.qp->qkey);  // ibv_modify_qp may change it
      ud_resp_->on_request(p, grh);
    }
    if (rc_resp_) {
      env_->set_srqn(p.xrc_srqn);  // XRC target: the SRQ this packet names (0 otherwise)
      rc_resp_->on_request(p);
    }
    if (uc_resp_) uc_resp_->on_request(p);
    in_packet_ = false;
  } else if (req_) {
    req_->on_response(p, fast_now_ns());
  }
  maybe_ask_caps();
}

void NetQp::on_timer(uint64_t now) {
  Call call(this);
  if (!req_ || flushed_) return;
  req_->on_timer(now);
}

void NetQp::trace_window() {
  if (!tracing() || !req_ || req_->congestion().changes() == traced_changes_) return;
  const transport::CongestionControl& cc = req_->congestion();
  traced_changes_ = cc.changes();
  const transport::CongestionStats& k = cc.stats();
  trace(qpn_, "window %u srtt_us=%.1f target_us=%.1f (cuts: delay %llu loss %llu timeout %llu cnp %llu)",
        cc.window(), double(cc.srtt_ns()) / 1e3, double(cc.target_ns()) / 1e3,
        (unsigned long long)k.delay_cuts, (unsigned long long)k.loss_cuts, (unsigned long long)k.timeouts,
        (unsigned long long)k.cnp_cuts);
}

void NetQp::flush() {
  Call call(this);
  if (flushed_) return;
  stop();
  if (req_) req_->flush();
}

void NetQp::drain(bool on) {
  Call call(this);
  if (req_ && !flushed_)
    req_->drain(on, fast_now_ns());
  else if (on)
    owner_->drained();  // nothing is in flight (UD sends complete as they leave)
}

void NetQp::stop() {
  // The ACK of what was executed leaves first, as a NIC's leaves on receipt:
  // a peer that learns of the teardown (rdma_cm's DREQ) before it would see
  // its last SEND flushed although it arrived.
  send_held_ack();
  flushed_ = true;
}

void NetQp::flush_link() {
  Guard<AdaptiveLock> g(mu_);
  tx_->flush();
  if (xdp_) xdp_->flush_faults();
}

void NetQp::flush_acks(uint64_t held_before) {
  if (!ack_held_.load(std::memory_order_relaxed)) return;  // the common case: no lock
  Guard<AdaptiveLock> g(mu_);
  if (ack_held_ && ack_held_since_ <= held_before) send_held_ack();
}

void NetQp::send_held_ack() {
  if (!ack_held_) return;
  ack_held_ = false;
  transmit(held_ack_);
}

void NetQp::send(wire::Packet& p) {
  const bool plain_ack = (p.bth.opcode & 0x1f) == wire::kAcknowledge &&
                         wire::ack_type(p.syndrome) == wire::AckType::kAck && p.payload.empty();
  if (plain_ack && in_packet_) {
    held_ack_ = p;  // ACKs are cumulative: the latest covers the ones before
    if (!ack_held_) ack_held_since_ = fast_now_ns();
    ack_held_ = true;
    return;
  }
  send_held_ack();  // keep the order of what the responder says
  transmit(p);
}

void NetQp::transmit(wire::Packet& p) {
  // A failure is a lost packet: counted, and RC retransmits.
  if (!xdp_) {
    (void)tx_->send(p, peer_);
    return;
  }
  (void)xdp_->send(p, local_, peer_, peer_mac_.b, counters_ ? &counters_->xdp : nullptr);
  if (!calls_) xdp_->flush();  // outside a call nothing else would send it
}

}  // namespace uroce::core
