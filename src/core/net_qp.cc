#include "core/net_qp.h"

#include <cstring>

#include "common/clock.h"
#include "common/log.h"
#include "core/net_engine.h"
#include "core/notify.h"
#include "core/qp_state.h"
#include "core/target.h"
#include "core/trace.h"
#include "core/ud_forward.h"
#include "link/shm_link.h"
#include "wire/grh.h"
#include "wire/ip_udp.h"  // kRoceV2Port

namespace uroce::core {

/// A call that may send or move the requester's deadline: holds the lock,
/// lets what it sends leave together when it returns (a message's packets
/// as one UDP GSO send, a reply and an ACK in one sendmmsg:
/// UdpEndpoint::cork), and publishes the deadline for lock-free readers.
class NetQp::Call {
 public:
  explicit Call(NetQp* q) : q_(q), g_(q->mu_) {
    q_->tx_->cork();
    ++q_->calls_;
  }
  ~Call() {
    q_->tx_->uncork();
    if (--q_->calls_ == 0 && q_->xdp_) q_->xdp_->flush();  // the frames of the call leave together
    q_->deadline_.store(q_->req_ && !q_->flushed_ ? q_->req_->next_deadline() : UINT64_MAX,
                        std::memory_order_relaxed);
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

 private:
  NetQp* q_;
  std::lock_guard<AdaptiveLock> g_;
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

/// The responder's view of the QP's own memory and queues: the target-side
/// helpers of the intra-host link, run by the owner on itself.
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

  void send(wire::Packet& p) override {
    if (tracing()) trace_packet(q_->cfg_.qpn, true, p);
    q_->send(p);
  }
  void qp_error(AsyncEvent ev) override { q_->to_error(true, ev); }
  void complete(const transport::SqWqe& w, WcStatus st, uint32_t byte_len) override {
    q_->done_(w, st, byte_len);
    if (q_->flush_rq_due_) {
      q_->flush_rq_due_ = false;
      flush_receives(q_->self_);
    }
  }
  void qp_error() override { q_->to_error(false, AsyncEvent::kQpFatal); }
  void sq_drained() override {
    if (q_->drained_) q_->drained_();
  }

 private:
  NetQp* q_;
  ClaimedRecv claimed_[2];  // a SEND in progress and a WRITE_WITH_IMM's receive at most
  uint32_t claimed_srqn_[2] = {};
  bool claimed_bad_[2] = {};
  uint32_t srqn_ = 0;
  uint32_t next_ = 0;
};

namespace {

/// A QP's sending socket at `ip`:`sport` (flows of this host that hash to
/// the same port share it), with the process's fault injector, its stream
/// distinct and reproducible per QP (`salt`), and capture.
link::UdpEndpoint::Options sender(const link::IpAddr& ip, uint16_t sport, uint32_t salt,
                                  const NetLinkSettings& link) {
  link::UdpEndpoint::Options o;
  o.bind = link::UdpAddr{ip, sport};
  o.reuse_addr = true;
  o.faults = link.faults;
  o.faults.seed = link.faults.seed * 1000003u + salt;
  o.capture_to = link.capture;
  return o;
}

/// A QP's receiving socket at `ip`:4791 (a group's too), shared with the host's other QPs.
link::UdpEndpoint::Options receiver(const link::IpAddr& ip, const NetLinkSettings& link) {
  link::UdpEndpoint::Options o;
  o.bind = link::UdpAddr{ip, wire::kRoceV2Port};
  o.reuse_addr = true;
  o.capture_to = link.capture;
  return o;
}

}  // namespace

Result<std::unique_ptr<NetQp>> NetQp::open(const Config& c, const PeerQp& self, HostShm* host,
                                           const NetLinkSettings& link, SendDone done) {
  std::unique_ptr<NetQp> q(new NetQp());
  q->cfg_ = c;
  q->self_ = self;
  q->host_ = host;
  q->done_ = std::move(done);
  q->peer_ = link::UdpAddr{c.remote_ip, wire::kRoceV2Port};
  q->env_ = std::make_unique<Env>(q.get());
  auto t = link::UdpEndpoint::open(sender(c.local_ip, c.sport, c.qpn, link));
  if (!t.is_ok()) {
    UROCE_ERR("QP %u: cannot bind UDP [%s]:%u (%s)", c.qpn, link::to_string(c.local_ip).c_str(), c.sport,
              strerror(t.err()));
    return Status(t.err());
  }
  q->tx_ = std::move(t.value());
  link::UdpEndpoint::Options rx = receiver(c.local_ip, link);
  if (c.type != QpType::kUd) rx.connect_to = link::UdpAddr{c.remote_ip, c.peer_sport};
  auto r = link::UdpEndpoint::open(rx);
  if (!r.is_ok()) {
    UROCE_ERR("QP %u: cannot bind UDP port %u (%s)", c.qpn, wire::kRoceV2Port, strerror(r.err()));
    return Status(r.err());
  }
  q->rx_ = std::move(r.value());
  transport::ResponderConfig rc = c.resp;
  rc.pmtu = c.pmtu;
  if (c.type == QpType::kUd)
    q->ud_resp_ = std::make_unique<transport::UdResponder>(self.qp->qkey, q->env_.get());
  else if (c.type == QpType::kUc)
    q->uc_resp_ = std::make_unique<transport::UcResponder>(rc, q->env_.get());
  else if (c.type == QpType::kRc || c.type == QpType::kXrcRecv) {
    rc.xrc = c.type == QpType::kXrcRecv;
    q->rc_resp_ = std::make_unique<transport::RcResponder>(rc, q->env_.get());
  }  // (an XRC initiator has no receive side: requests to it are dropped)
  if (NetCounters* k = c.counters) {
    q->count_sender(q->tx_.get());
    q->count_receiver(q->rx_.get());
    if (q->ud_resp_) q->ud_resp_->count_into(&k->ud);
    if (q->uc_resp_) q->uc_resp_->count_into(&k->uc);
    if (q->rc_resp_) q->rc_resp_->count_into(&k->resp);
  }
  return q;
}

NetQp::~NetQp() {
  // What the QP's link did, for diagnosis (UROCE_LOG=info; `uroce stat`
  // shows the same while the QP lives).
  if (!cfg_.counters || log_level() < LogLevel::kInfo) return;
  std::string line;
  for (const CounterField& f : net_counter_fields())
    if (const uint64_t v = counter_at(*cfg_.counters, f))
      line += " " + std::string(f.name) + "=" + std::to_string(v);
  UROCE_INFO("QP %u on UDP:%s", cfg_.qpn, line.c_str());
}

Status NetQp::join(uint32_t group) {
  // Every member of the host binds <group>:4791.
  link::UdpEndpoint::Options o = receiver(link::IpAddr::v4(group), NetEngine::get().settings());
  o.join_on = cfg_.local_ip.ip4();
  if (!o.join_on) return Status(EINVAL);  // IPv4 groups only
  auto r = link::UdpEndpoint::open(o);
  if (!r.is_ok()) return Status(r.err());
  if (Status st = NetEngine::get().add_socket(this, r.value().get(), true); !st.is_ok()) return st;
  count_receiver(r.value().get());
  groups_.push_back(Group{group, std::move(r.value())});
  return Status::ok();
}

Status NetQp::add_address(const link::IpAddr& ip) {
  const NetLinkSettings& link = NetEngine::get().settings();
  auto t = link::UdpEndpoint::open(sender(ip, cfg_.sport, cfg_.qpn + 1, link));
  if (!t.is_ok()) return Status(t.err());
  auto r = link::UdpEndpoint::open(receiver(ip, link));
  if (!r.is_ok()) return Status(r.err());
  if (Status st = NetEngine::get().add_socket(this, r.value().get(), false); !st.is_ok()) return st;
  std::lock_guard<AdaptiveLock> g(mu_);
  count_sender(t.value().get());
  count_receiver(r.value().get());
  more_.push_back(Address{ip, std::move(t.value()), std::move(r.value())});
  return Status::ok();
}

void NetQp::leave(uint32_t group) {
  for (auto it = groups_.begin(); it != groups_.end(); ++it)
    if (it->ip == group) {
      NetEngine::get().remove_socket(it->rx.get());
      groups_.erase(it);
      return;
    }
}

void NetQp::start_requester(const transport::RequesterConfig& c) {
  Call call(this);
  transport::RequesterConfig rc = c;
  rc.pmtu = cfg_.pmtu;
  rc.unreliable = cfg_.type == QpType::kUc;
  rc.xrc = cfg_.type == QpType::kXrcSend;
  req_ = std::make_unique<transport::RcRequester>(rc, env_.get());
  if (cfg_.counters) req_->count_into(&cfg_.counters->req);
}

void NetQp::count_sender(link::UdpEndpoint* e) {
  if (NetCounters* k = cfg_.counters) e->count_into(&k->udp, &k->id, &k->faults);
}

void NetQp::count_receiver(link::UdpEndpoint* e) {
  // (A receiving socket sends nothing: its fault injector never runs.)
  if (NetCounters* k = cfg_.counters) e->count_into(&k->udp, &k->id, &k->faults);
}

void NetQp::drain(bool on, std::function<void()> drained) {
  Call call(this);
  drained_ = std::move(drained);
  if (req_ && !flushed_) req_->drain(on, fast_now_ns());
}

void NetQp::post(transport::SqWqe&& w) {
  Call call(this);
  if (!req_ || flushed_) {
    w.signaled = true;
    done_(w, WcStatus::kWrFlushErr, 0);
  } else {
    // The request first: it is what the peer waits for (a ping-pong's
    // reply); the held ACK (responder's, other direction) right after.
    const bool held = ack_held_;
    ack_held_ = false;  // the requester's packets must not send it first
    req_->post(std::move(w), fast_now_ns());
    if (held) transmit(held_ack_);
  }
}

bool NetQp::send_ud(const link::IpAddr& dst, const link::IpAddr& src, uint32_t dest_qpn, uint32_t qkey,
                    bool has_imm, uint32_t imm, bool solicited, std::span<const uint8_t> payload) {
  wire::Packet p;
  p.bth.opcode = wire::opcode(wire::Service::kUd, has_imm ? wire::kSendOnlyImm : wire::kSendOnly);
  p.bth.dest_qp = dest_qpn;
  p.bth.solicited = solicited;
  std::lock_guard<AdaptiveLock> g(mu_);
  // The work request's source address, else the first of dst's family.
  auto fits = [&dst](const link::IpAddr& a) { return a.is_v4() == dst.is_v4(); };
  link::UdpEndpoint* tx = nullptr;
  if (fits(src)) {
    if (cfg_.local_ip == src) tx = tx_.get();
    for (const Address& a : more_)
      if (a.ip == src) tx = a.tx.get();
  }
  if (!tx && fits(cfg_.local_ip)) tx = tx_.get();
  for (const Address& a : more_)
    if (!tx && fits(a.ip)) tx = a.tx.get();
  if (!tx) return false;
  p.bth.psn = ud_psn_;
  ud_psn_ = (ud_psn_ + 1) & 0xffffff;
  p.qkey = qkey;
  p.src_qp = cfg_.qpn;
  p.imm = imm;
  p.payload = payload;
  (void)tx->send(p, link::UdpAddr{dst, wire::kRoceV2Port});  // failures are counted in its stats
  return true;
}

void NetQp::on_packet(const wire::Packet& p, const link::UdpAddr& from, const link::UdpAddr& to) {
  if (tracing()) trace_packet(cfg_.qpn, false, p);
  Call call(this);
  if (flushed_) return;
  const QpState st = QpState(self_.qp->state.load(std::memory_order_acquire));
  const wire::OpInfo* info = wire::op_info(p.bth.opcode);
  if (!info) return;
  if (info->flags & wire::kRequest) {
    // IBA 10.3.1: a QP receives in RTR, RTS, SQD and SQE; before RTR it drops.
    if (!state_can_receive(st)) return;
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
}

void NetQp::on_timer(uint64_t now) {
  Call call(this);
  if (req_ && !flushed_) req_->on_timer(now);
}

void NetQp::flush() {
  Call call(this);
  if (flushed_) return;
  // The ACK of what was executed leaves first, as a NIC's leaves on receipt:
  // a peer that learns of the teardown (rdma_cm's DREQ) before it would see
  // its last SEND flushed although it arrived.
  send_held_ack();
  flushed_ = true;
  if (req_) req_->flush();
}

NetQp::Last NetQp::release_for_linger() {
  std::lock_guard<AdaptiveLock> g(mu_);
  Last l;
  if (!rc_resp_ || rc_resp_->epsn() == cfg_.resp.epsn) return l;
  l.any = true;
  l.dest_qpn = cfg_.resp.dest_qp;
  l.epsn = rc_resp_->epsn();
  l.msn = rc_resp_->msn();
  l.sport = cfg_.sport;
  l.rx_fd = rx_->fd();
  return l;
}

void NetQp::flush_link() {
  std::lock_guard<AdaptiveLock> g(mu_);
  tx_->flush();
  if (xdp_) xdp_->flush_faults();
}

void NetQp::flush_acks(uint64_t held_before) {
  if (!ack_held_.load(std::memory_order_relaxed)) return;  // the common case: no lock
  std::lock_guard<AdaptiveLock> g(mu_);
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
  (void)xdp_->send(p, local_, peer_, peer_mac_.b, cfg_.counters ? &cfg_.counters->xdp : nullptr);
  if (!calls_) xdp_->flush();  // outside a call nothing else would send it
}

void NetQp::use_xdp(link::XdpPort* port, const link::Mac& peer_mac) {
  std::lock_guard<AdaptiveLock> g(mu_);
  xdp_ = port;
  peer_mac_ = peer_mac;
  local_ = link::UdpAddr{cfg_.local_ip, cfg_.sport};
}

void NetQp::to_error(bool async, AsyncEvent ev) {
  if (async) {
    target_error(self_, ev);  // ERR, receives flushed, the event raised
  } else {
    uint32_t s = self_.qp->state.load(std::memory_order_acquire);
    while (s != uint32_t(QpState::kErr) &&
           !self_.qp->state.compare_exchange_weak(s, uint32_t(QpState::kErr), std::memory_order_acq_rel)) {
    }
    // The requester completes its failed WQE next (RequesterEnv::qp_error
    // comes first): the receives flush after that completion, so a CQ that
    // both queues share shows the error before the flushes, as hardware
    // orders them (a program that stops at the first bad completion sees
    // the cause, not a flush).
    flush_rq_due_ = true;
  }
  // What the requester still holds ends with WR_FLUSH_ERR (it completed
  // the failing WQE itself); the responder answers nothing any more, once
  // the ACK of what it executed is out (as in flush()).
  send_held_ack();
  flushed_ = true;
  if (req_ && !req_->failed()) req_->flush();
}

}  // namespace uroce::core
