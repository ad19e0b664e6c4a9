#include "net/net_engine.h"

#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/fork_gate.h"
#include "common/log.h"
#include "contract/inbox.h"
#include "memory/peer_map.h"
#include "net/ud_forward.h"
#include "wire/cm_mad.h"

namespace uroce::core {

namespace {

constexpr uint64_t kIdleWakeNs = 100'000'000;  // re-check deadlines at least this often
constexpr int kMaxEvents = 64;
// A ready index with this bit names a QP's extra socket (NetEngine::extras_).
constexpr int kExtraTag = 1 << 30;
// The ready index of the process's inbox (net_forward.h).
constexpr int kInboxTag = 1 << 29;
// A ready index with this bit names an AF_XDP port (NetEngine::xdp_).
constexpr int kXdpTag = 1 << 28;
constexpr int kMaxRoundsPerSocket = 8;  // batches per readable socket per round
constexpr int kMaxTouched = 16;         // QPs a batch's ACKs are tracked for (more: all)
// After a packet, the engine thread keeps reading for this long before it
// sleeps again (spin, then sleep: docs/network-link.md).
constexpr uint64_t kSpinIdleNs = 50'000;
// While the application posts but does not read the sockets (it spins on
// memory), packets left in a socket are taken in by the engine thread, which
// looks every kAppCheckNs. The thread keeps the default 50 us timer slack on
// purpose: with exact 20 us sleeps its wake-ups took ib_send_lat 2 B over
// UDP from 7.3 to 23 us (t_typical, two cores, two spinning programs); with
// the slack, ib_write_lat (memory polling) is ~46 us instead of the ~170 us
// it was while this thread only woke at the end of kAppPollGraceNs.
// While the application reads the sockets itself (it polls its CQ), each
// look only takes its core from it: the looks double in distance up to
// kAppCheckMaxNs. With 200 us and a 5 us activity test the thread still
// woke ~30,000 times a second beside ib_send_lat (each wake a context switch
// on the application's core, and a preempted thread holding run_mu made the
// application spin for milliseconds): t_avg 16.2 us against 6.2 us with no
// looks at all.
constexpr uint64_t kAppCheckNs = 20'000;
constexpr uint64_t kAppCheckMaxNs = 2'000'000;
// A held ACK a posted receive finds older than this is sent at once.
constexpr uint64_t kAckHoldNs = 10'000;
// A held ACK the application's next poll finds older than this is sent
// then; a younger one waits for the post that may follow. A peer's request
// and the ACK it carries along leave one after the other and may reach two
// polls of a spinning program (seen on the AF_XDP link, whose ring the poll
// reads while the sender's kernel is still putting frames in): flushed by
// the second poll, the ACK went alone, the program's next request went
// alone too, and a peer that spins on memory between its polls (perftest's
// ib_write_lat) then waited for its engine thread's look at every round
// trip (~78 us instead of ~3).
constexpr uint64_t kPollAckHoldNs = 3'000;
// A receive posted this soon after a poll that read every socket empty does
// not look at the sockets again: what came in since raced with the post (as
// on a NIC, it may take the new receive or find none).
constexpr uint64_t kCatchUpFreshNs = 5'000;
// An application's poll reads up to this many sockets directly (more: the
// readable ones, from epoll).
constexpr int kDirectReadSockets = 2;
// Its direct reads include the QPs' extra sockets every this many times.
constexpr unsigned kExtraReadEvery = 8;
// And the process's inbox, before a packet came through it, every this many
// times: most programs never get one, and a receive call every eight polls
// made ib_send_lat 2 B over UDP ~15 % slower (alternating runs, medians of 8).
constexpr unsigned kIdleInboxReadEvery = 64;
// An application that read the sockets within this long reads them again
// very soon: the engine thread leaves them alone.
constexpr uint64_t kAppActiveNs = 5'000;
// An application that polled within this long is taken to be polling still.
constexpr uint64_t kAppPollGraceNs = 200'000;
// Packets parked for evidence of their IPv4 identification (link/id_trust.h)
// are looked at again at least this often (uroced records a frame within
// tens of microseconds of its arrival).
constexpr uint64_t kParkedRecheckNs = 100'000;

/// An RC, UC or XRC packet for a QP of another process of this host: queued
/// for that process's inbox (contract/inbox.h).
NetForward pass_on(NetForwarder& f, const wire::Packet& p, const link::UdpAddr& from,
                   const link::UdpAddr& to) {
  if ((p.bth.opcode >> 5) == uint8_t(wire::Service::kUd)) return NetForward::kNoSuchQp;
  auto r = PeerMap::get().resolve(p.bth.dest_qp);
  if (!r.is_ok()) return NetForward::kNoSuchQp;
  const PeerQp& t = r.value();
  if (t.qp->qp_type == uint32_t(QpType::kUd)) return NetForward::kNoSuchQp;
  if (t.seg->pid == getpid()) return NetForward::kThisProcess;
  return f.add_for(t.seg->pid, p, from, to);
}

std::string expand_pid(std::string path) {
  for (size_t at; (at = path.find("%p")) != std::string::npos;) path.replace(at, 2, std::to_string(getpid()));
  return path;
}

}  // namespace

NetEngine& NetEngine::get() {
  static NetEngine* e = new NetEngine();  // lives for the process
  return *e;
}

NetEngine::NetEngine() {
  pthread_atfork([] { get().fork_prepare(); }, [] { get().fork_parent(); }, [] { get().fork_child(); });
}

void NetEngine::fork_prepare() { fork_gate_.prepare(run_mu_); }

void NetEngine::fork_parent() { run_mu_.unlock(); }

void NetEngine::fork_child() {
  fork_gate_.child();
  new (&run_mu_) std::mutex();
  slots_.clear();
  extras_.clear();
  parked_.clear();
  // The parent's AF_XDP sockets are the parent's (uroced lent them to it):
  // only this copy of their descriptors and memory goes.
  new (&xdp_mu_) std::mutex();
  xdp_.clear();
  // The parent's inbox (bound to its pid) is the parent's: only this copy
  // of its descriptor goes.
  inbox_.reset();
  inbox_used_ = false;
  forwarder_.reset();
  by_qpn_.clear();
  // The parent's capture file is the parent's: its writer is left alone (not
  // destroyed: it must not write or close anything the parent owns), and the
  // child writes its own file when the path names one per process (%p).
  if (settings_.capture) {
    (void)new std::shared_ptr<wire::PcapWriter>(std::move(settings_.capture));
    const char* path = getenv("UROCE_CAPTURE");
    if (path && strstr(path, "%p")) {
      auto w = wire::PcapWriter::open(expand_pid(path));
      if (w.is_ok()) settings_.capture = std::move(w.value());
    }
  }
  if (ep_ >= 0) close(ep_);
  if (ep_timers_ >= 0) close(ep_timers_);
  if (wake_ >= 0) close(wake_);
  ep_ = ep_timers_ = wake_ = -1;
  app_poll_ns_.store(0);
  app_read_ns_.store(0);
  drained_ns_.store(0);
  started_ = false;
  planned_wake_.store(0);
  n_active_.store(0);
}

const NetLinkSettings& NetEngine::settings() {
  std::call_once(settings_once_, [this] {
    if (const char* f = getenv("UROCE_FAULTS"); f && *f) {
      auto c = link::parse_faults(f);
      if (c.is_ok())
        settings_.faults = c.value();
      else
        UROCE_ERR("UROCE_FAULTS=%s: not understood (drop=P,dup=P,reorder=P,corrupt=P,seed=N); no faults", f);
    }
    if (const char* x = getenv("UROCE_LINK_XDP"); x && *x) {
      if (strcmp(x, "0") == 0)
        settings_.xdp = XdpUse::kNever;
      else if (strcmp(x, "require") == 0)
        settings_.xdp = XdpUse::kRequired;
      else if (strcmp(x, "1") != 0)
        UROCE_ERR("UROCE_LINK_XDP=%s: not understood (0, 1 or require); AF_XDP when lent", x);
    }
    if (const char* c = getenv("UROCE_CAPTURE"); c && *c) {
      const std::string path = expand_pid(c);
      auto w = wire::PcapWriter::open(path);
      if (w.is_ok())
        settings_.capture = std::move(w.value());
      else
        UROCE_ERR("UROCE_CAPTURE=%s: cannot write (%s)", path.c_str(), strerror(w.err()));
    }
  });
  return settings_;
}

Status NetEngine::add(NetQp* q) {
  std::lock_guard<std::mutex> g(run_mu_);
  if (!started_) {
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    ep_timers_ = epoll_create1(EPOLL_CLOEXEC);
    wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ep_ < 0 || ep_timers_ < 0 || wake_ < 0) return Status(errno);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = UINT32_MAX;
    epoll_ctl(ep_, EPOLL_CTL_ADD, wake_, &ev);
    epoll_ctl(ep_timers_, EPOLL_CTL_ADD, wake_, &ev);
    auto in = NetInbox::open(getpid());
    if (in.is_ok()) {
      inbox_ = std::move(in.value());
      ev.data.u32 = uint32_t(kInboxTag);
      epoll_ctl(ep_, EPOLL_CTL_ADD, inbox_->fd(), &ev);
    } else {
      UROCE_WARN("no inbox for packets other processes get for this one's QPs (%s)", strerror(in.err()));
    }
    started_ = true;
    fork_gate_.starting();
    std::thread([this] { loop(); }).detach();
  }
  uint32_t slot = 0;
  while (slot < slots_.size() && slots_[slot]) ++slot;
  if (slot == slots_.size()) slots_.push_back(nullptr);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = slot;
  if (epoll_ctl(ep_, EPOLL_CTL_ADD, q->rx().fd(), &ev) != 0) return Status(errno);
  slots_[slot] = q;
  by_qpn_[q->qpn()] = q;
  n_active_.fetch_add(1, std::memory_order_relaxed);
  return Status::ok();
}

void NetEngine::remove(NetQp* q) {
  std::lock_guard<std::mutex> g(run_mu_);
  for (NetQp*& x : slots_)
    if (x == q) {
      epoll_ctl(ep_, EPOLL_CTL_DEL, q->rx().fd(), nullptr);
      x = nullptr;
      n_active_.fetch_sub(1, std::memory_order_relaxed);
    }
  for (Extra& x : extras_)
    if (x.q == q) {
      epoll_ctl(ep_, EPOLL_CTL_DEL, x.ep->fd(), nullptr);
      x = {};
    }
  auto it = by_qpn_.find(q->qpn());
  if (it != by_qpn_.end() && it->second == q) by_qpn_.erase(it);
  if (n_active_.load(std::memory_order_relaxed) == 0) {
    // What the AF_XDP ports dropped so far (the frames no QP of this
    // process could take: a well-formed one for a QP gone counts in
    // inbox_lost_ below).
    for (const Xdp& x : xdp_) {
      if (!x.port) continue;
      const link::XdpPort::Stats& s = x.port->stats();
      const uint64_t ring = x.port->ring_dropped();
      if (s.bad_icrc + s.malformed + s.not_roce + s.send_full + ring)
        UROCE_INFO(
            "AF_XDP port of interface %u: %llu frames received, %llu sent; dropped: %llu bad ICRC, %llu "
            "malformed, %llu not RoCE v2, %llu by the kernel (rings full), %llu not sent (send frames in "
            "flight)",
            x.ifindex, (unsigned long long)s.received, (unsigned long long)s.sent,
            (unsigned long long)s.bad_icrc, (unsigned long long)s.malformed, (unsigned long long)s.not_roce,
            (unsigned long long)ring, (unsigned long long)s.send_full);
    }
    auto n = [&](UdForward f) {
      return (unsigned long long)forwarded_[size_t(f)].exchange(0, std::memory_order_relaxed);
    };
    const unsigned long long del = n(UdForward::kDelivered), drop = n(UdForward::kDropped),
                             qkey = n(UdForward::kBadQkey), none = n(UdForward::kNoSuchQp),
                             other = n(UdForward::kNotUd);
    auto m = [&](NetForward f) {
      return (unsigned long long)passed_[size_t(f)].exchange(0, std::memory_order_relaxed);
    };
    const unsigned long long passed = m(NetForward::kPassed), full = m(NetForward::kFull),
                             mine = m(NetForward::kThisProcess), nobody = m(NetForward::kNoSuchQp);
    const unsigned long long lost = inbox_lost_.exchange(0, std::memory_order_relaxed);
    if (del + drop + qkey + none + other)
      UROCE_INFO(
          "packets for QPs of other processes: %llu UD delivered, %llu dropped (%llu no receive or not "
          "receiving, %llu bad Q_Key), %llu for no QP of this host, %llu not UD",
          del, drop + qkey, drop, qkey, none, other);
    if (passed + full + mine + nobody + lost)
      UROCE_INFO(
          "RC/UC packets for QPs of other processes: %llu passed on, %llu lost (inbox full); %llu for no QP "
          "of this host, %llu for a QP of this process not on the network link; from other processes: %llu "
          "for no QP of this one",
          passed, full, nobody, mine, lost);
  }
}

link::XdpPort* NetEngine::xdp_port(const DeviceInfo& d, ControlClient* ctl) {
  if (d.is_loopback || !ctl) return nullptr;
  std::lock_guard<std::mutex> g(xdp_mu_);
  for (const Xdp& x : xdp_)
    if (x.ifindex == d.ifindex) return x.port.get();
  Xdp x{d.ifindex, nullptr};
  const NetLinkSettings& link = settings();
  const char* why = nullptr;  // why this process has no port there
  int err = 0;
  if (link.xdp == XdpUse::kNever) {
    why = "UROCE_LINK_XDP=0 asks for UDP sockets";
  } else if (auto fd = ctl->xsk_open(d.ifindex); !fd.is_ok()) {
    err = fd.err();
    why = err == EPERM    ? "uroced lacks CAP_NET_RAW, CAP_NET_ADMIN or CAP_BPF"
          : err == EBUSY  ? "another process has the interface"
          : err == EINVAL ? "uroced does not lend AF_XDP sockets (an older uroced)"
                          : "uroced could not lend an AF_XDP socket";
  } else if (auto xsk = link::XskSocket::bind(fd.value(), int(d.ifindex), 0, {}); !xsk.is_ok()) {
    err = xsk.err();
    why = err == ENOBUFS ? "its packet memory is over RLIMIT_MEMLOCK" : "binding the AF_XDP socket failed";
  } else if (Status st = ctl->xsk_ready(d.ifindex); !st.is_ok()) {
    err = st.err();
    why = "uroced refused the bound socket";
  } else {
    link::XdpPort::Options o;
    memcpy(o.mac, d.mac, 6);
    o.faults = link.faults;
    o.capture = link.capture;
    x.port = std::make_unique<link::XdpPort>(std::move(xsk.value()), o);
  }
  if (why)
    UROCE_INFO("%s: RoCE v2 through UDP sockets, not AF_XDP: %s%s%s", d.name, why, err ? ": " : "",
               err ? strerror(err) : "");
  else if (x.port)
    UROCE_INFO("%s: RoCE v2 through an AF_XDP socket on %s", d.name, d.ifname);
  link::XdpPort* port = x.port.get();
  std::lock_guard<std::mutex> r(run_mu_);
  if (port && ep_ >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = uint32_t(kXdpTag) | uint32_t(xdp_.size());
    epoll_ctl(ep_, EPOLL_CTL_ADD, port->fd(), &ev);
  }
  xdp_.push_back(std::move(x));
  return port;
}

Status NetEngine::add_socket(NetQp* q, link::UdpEndpoint* ep, bool multicast) {
  std::lock_guard<std::mutex> g(run_mu_);
  uint32_t i = 0;
  while (i < extras_.size() && extras_[i].ep) ++i;
  if (i == extras_.size()) extras_.push_back({});
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = uint32_t(kExtraTag) | i;
  if (epoll_ctl(ep_, EPOLL_CTL_ADD, ep->fd(), &ev) != 0) return Status(errno);
  extras_[i] = {q, ep, multicast};
  return Status::ok();
}

void NetEngine::remove_socket(link::UdpEndpoint* ep) {
  std::lock_guard<std::mutex> g(run_mu_);
  for (Extra& x : extras_)
    if (x.ep == ep) {
      epoll_ctl(ep_, EPOLL_CTL_DEL, ep->fd(), nullptr);
      x = {};
    }
}

void NetEngine::kick(uint64_t deadline) {
  if (deadline >= planned_wake_.load(std::memory_order_relaxed)) return;
  // An application that polls runs due timers itself (poll_now), and wakes
  // this thread when it stops to wait (app_sleeps): no system call here.
  const uint64_t app = app_poll_ns_.load(std::memory_order_relaxed);
  if (app && fast_now_ns() - app < kAppPollGraceNs) return;
  planned_wake_.store(deadline, std::memory_order_relaxed);
  uint64_t one = 1;
  ssize_t w = write(wake_, &one, sizeof(one));
  (void)w;
}

int NetEngine::readable(int* ready) {
  epoll_event evs[kMaxEvents];
  const int n = epoll_wait(ep_, evs, kMaxEvents, 0);
  int m = 0;
  for (int i = 0; i < n; ++i)
    if (evs[i].data.u32 != UINT32_MAX) ready[m++] = int(evs[i].data.u32);
  return m;
}

void NetEngine::track_parked(const link::UdpEndpoint* ep, int code) {
  auto it = std::find(parked_.begin(), parked_.end(), code);
  if (ep->parked() && it == parked_.end()) parked_.push_back(code);
  if (!ep->parked() && it != parked_.end()) parked_.erase(it);
}

int NetEngine::with_parked(int* ready, int n) const {
  for (int code : parked_)
    if (n < kMaxEvents && std::find(ready, ready + n, code) == ready + n) ready[n++] = code;
  return n;
}

int NetEngine::round(const int* ready, int n, bool* drained, bool ack_per_batch) {
  int got = 0;
  if (drained) *drained = true;
  // With ack_per_batch, the plain ACKs a batch of datagrams causes are held
  // and sent when the batch is handled: one cumulative ACK per QP per batch
  // instead of one (and one system call) per message.
  struct Batch {
    NetEngine* e;
    bool ack_per_batch;
    NetQp* owner = nullptr;  // the socket's QP: most packets are for it
    bool group = false;      // the socket is a multicast group's, of `owner`
    bool inbox = false;      // the packets come from the inbox: never passed on again
    bool xdp = false;        // ... from an AF_XDP port (counted per QP)
    int nt = 0;
    bool overflow = false;
    NetQp* touched[kMaxTouched];  // [0, nt) only
  } b;
  b.e = this;
  b.ack_per_batch = ack_per_batch;
  auto dispatch = [c = &b](const wire::Packet& p, const link::UdpAddr& from, const link::UdpAddr& to) {
    NetQp* q = c->owner;
    if (c->group) {
      // IBA 10.5.2.3: a multicast packet names QP 0xFFFFFF; every attached
      // QP gets it (Linux gave each group socket its own copy).
      if (p.bth.dest_qp != wire::kMulticastQpn) return;
    } else if (!q || q->qpn() != p.bth.dest_qp) {
      auto it = c->e->by_qpn_.find(p.bth.dest_qp);
      if (it == c->e->by_qpn_.end()) {
        // Not one of this process's: for another process's QP on this host
        // (UD: core/ud_forward.h; the others: net_forward.h), or nobody's.
        if (c->inbox)
          c->e->inbox_lost_.fetch_add(1, std::memory_order_relaxed);
        else if (p.bth.dest_qp == wire::cm::kGsiQpn)  // a CM message: uroced's
          c->e->passed_[size_t(c->e->forwarder_.add_for(kGsiOwner, p, from, to))].fetch_add(
              1, std::memory_order_relaxed);
        else if ((p.bth.opcode >> 5) == uint8_t(wire::Service::kUd))
          c->e->forwarded_[size_t(forward_ud(p, from, to))].fetch_add(1, std::memory_order_relaxed);
        else
          c->e->passed_[size_t(pass_on(c->e->forwarder_, p, from, to))].fetch_add(1,
                                                                                  std::memory_order_relaxed);
        return;
      }
      q = it->second;
    }
    if (c->xdp) q->count_xdp_received(p);
    q->on_packet(p, from, to);
    if (!c->ack_per_batch || (c->nt && c->touched[c->nt - 1] == q)) return;
    if (c->nt < kMaxTouched)
      c->touched[c->nt++] = q;
    else
      c->overflow = true;
  };
  // What was passed on to other processes leaves with the batch's ACKs.
  auto pass_on = [this] {
    if (const uint64_t lost = forwarder_.flush()) {
      passed_[size_t(NetForward::kPassed)].fetch_sub(lost, std::memory_order_relaxed);
      passed_[size_t(NetForward::kFull)].fetch_add(lost, std::memory_order_relaxed);
    }
  };
  auto send_acks = [&] {
    if (b.overflow) {
      for (NetQp* q : slots_)
        if (q) q->flush_acks();
    } else {
      for (int i = 0; i < b.nt; ++i) b.touched[i]->flush_acks();
    }
    b.nt = 0;
    b.overflow = false;
  };
  for (int i = 0; i < n; ++i) {
    NetQp* q = nullptr;
    link::UdpEndpoint* ep = nullptr;
    b.group = false;
    b.inbox = false;
    b.xdp = false;
    if (ready[i] == kInboxTag) {
      if (!inbox_) continue;
      b.owner = nullptr;
      b.inbox = true;
      bool more = false;
      const int k = inbox_->poll(dispatch, link::UdpEndpoint::kBatch, &more);
      if (k) inbox_used_ = true;
      got += k;
      if (ack_per_batch) send_acks();
      if (more && drained) *drained = false;
      continue;
    }
    if (ready[i] >= 0 && (ready[i] & kXdpTag)) {
      // Frames uroced steered here: for this process's QPs only, never passed on.
      const size_t x = size_t(ready[i] & ~kXdpTag);
      if (x >= xdp_.size() || !xdp_[x].port) continue;
      b.owner = nullptr;
      b.inbox = true;
      b.xdp = true;
      const int k = xdp_[x].port->poll(dispatch, link::UdpEndpoint::kBatch);
      got += k;
      if (ack_per_batch) send_acks();
      if (k == link::UdpEndpoint::kBatch && drained) *drained = false;
      continue;
    }
    if (ready[i] >= 0 && (ready[i] & kExtraTag)) {
      const size_t x = size_t(ready[i] & ~kExtraTag);
      if (x < extras_.size()) q = extras_[x].q, ep = extras_[x].ep, b.group = extras_[x].multicast;
    } else if (ready[i] >= 0 && size_t(ready[i]) < slots_.size()) {
      q = slots_[size_t(ready[i])];
      if (q) ep = &q->rx();
    }
    if (!q) {
      // A socket gone since its packets were parked (its QP was destroyed).
      parked_.erase(std::remove(parked_.begin(), parked_.end(), ready[i]), parked_.end());
      continue;
    }
    b.owner = q;
    for (int r = 0;; ++r) {
      bool more = false;
      const int k = ep->poll(dispatch, link::UdpEndpoint::kBatch, &more);
      got += k;
      pass_on();
      if (ack_per_batch) send_acks();
      // A single datagram read from a quiet socket: more may wait, but the
      // next round reads them (the one in hand goes to its QP first).
      if (k < link::UdpEndpoint::kBatch) {
        if (more && drained) *drained = false;
        break;
      }
      if (r + 1 == kMaxRoundsPerSocket) {
        if (drained) *drained = false;
        break;
      }
    }
    track_parked(ep, ready[i]);
  }
  return got;
}

void NetEngine::catch_up_slow() {
  if (fast_now_ns() - drained_ns_.load(std::memory_order_relaxed) < kCatchUpFreshNs) return;
  // Whoever else is handling packets finishes first (their packets came
  // earlier); then whatever is still queued.
  std::lock_guard<std::mutex> g(run_mu_);
  int ready[kMaxEvents];
  const int m = readable(ready);
  // ACKs held longer than kAckHoldNs go out here: a program busy with
  // completions posts receives without ever polling an empty CQ, so nothing
  // else would send them soon (the 10^6-message flood stalled on exactly
  // that). A younger one waits for the post that usually follows a posted
  // receive (a ping-pong's reply): both leave in one system call.
  const uint64_t held_before = fast_now_ns() - kAckHoldNs;
  for (NetQp* q : slots_)
    if (q) q->flush_acks(held_before);
  if (m) round(ready, m);
}

void NetEngine::app_sleeps() {
  if (app_poll_ns_.exchange(0, std::memory_order_relaxed) == 0) return;
  uint64_t one = 1;
  ssize_t w = write(wake_, &one, sizeof(one));
  (void)w;
}

void NetEngine::app_posts() { app_poll_ns_.store(fast_now_ns(), std::memory_order_relaxed); }

bool NetEngine::poll_now() {
  if (n_active_.load(std::memory_order_relaxed) == 0) return false;
  const uint64_t now = fast_now_ns();
  app_poll_ns_.store(now, std::memory_order_relaxed);
  std::unique_lock<std::mutex> g(run_mu_, std::try_to_lock);
  if (!g.owns_lock()) {
    // The engine thread has it. On the application's own core it may have
    // been preempted while holding it: let it finish instead of spinning
    // through the rest of a scheduler slice (milliseconds, seen).
    __attribute__((tls_model("initial-exec"))) static thread_local unsigned busy = 0;
    if (++busy % 16 == 0) sched_yield();
    return false;
  }
  app_read_ns_.store(now, std::memory_order_relaxed);
  // Which sockets to read: with a few, each (a receive call finds nothing
  // in ~0.3 us); with more, those one epoll_wait (~0.1 us) says are
  // readable. Asking epoll first costs a packet ~0.7 us more on its way in
  // (ib_send_lat 2 B, one QP: 4.8 -> 5.5 us).
  int ready[kMaxEvents];
  int n = 0;
  // The AF_XDP ports first, every time: looking at a ring is a load, no
  // system call.
  for (size_t i = 0; i < xdp_.size() && n < kMaxEvents; ++i)
    if (xdp_[i].port) ready[n++] = kXdpTag | int(i);
  const bool direct = n_active_.load(std::memory_order_relaxed) <= kDirectReadSockets;
  // A QP's extra sockets (multicast groups, a UD QP's other addresses), and
  // the UDP socket of a QP whose frames come through an AF_XDP port (what
  // came before the steering), every kExtraReadEvery-th time: each is a
  // receive call more per poll, and most carry little.
  const bool extras = direct && ++direct_polls_ % kExtraReadEvery == 0;
  bool skipped = false;  // sockets left unread this time
  for (size_t i = 0; i < slots_.size(); ++i)
    if (NetQp* q = slots_[i]) {
      q->flush_acks(now - kPollAckHoldNs);  // what an earlier poll held back
      if (!direct || n >= kMaxEvents) continue;
      // (Left unread, such a socket still counts as drained: after the
      // steering nothing comes to it, as to an inbox that never had anything.)
      if (!q->on_xdp() || extras) ready[n++] = int(i);
    }
  if (direct) {
    for (size_t i = 0; i < extras_.size() && n < kMaxEvents; ++i)
      if (extras_[i].ep) {
        if (extras)
          ready[n++] = kExtraTag | int(i);
        else
          skipped = true;
      }
    // The inbox: every time once packets came through it, before that now
    // and then; an inbox left unread that never had any still leaves the
    // poll drained. (Counted as skipped, it sent every post through
    // catch_up_slow's epoll_wait: ib_send_lat 2 B over UDP made one per
    // message and twice the context switches.)
    if (inbox_ && n < kMaxEvents && (inbox_used_ || direct_polls_ % kIdleInboxReadEvery == 0))
      ready[n++] = kInboxTag;
  }
  if (!direct) n = readable(ready);
  n = with_parked(ready, n);
  bool drained = n < kMaxEvents && !skipped;
  int got = 0;
  if (n) {
    bool all = false;
    got = round(ready, n, &all, false);  // ACKs held until the application's next post or poll
    drained = drained && all;
  }
  if (drained) drained_ns_.store(now, std::memory_order_relaxed);
  // Due timers too, after what arrived (an ACK waiting in a socket is no
  // timeout): a spinning application may hold run_mu most of the time, and
  // the engine thread then waits for it (the mutex is not fair).
  for (NetQp* q : slots_)
    if (q && q->next_deadline() <= now) q->on_timer(now);
  return got > 0;
}

void NetEngine::loop() {
  epoll_event evs[kMaxEvents];
  const bool faults = settings().faults.any();
  // While the application polls: how long this thread sleeps between looks
  // (doubles while the application has read the sockets itself since the
  // previous look, back to kAppCheckNs when it has not).
  uint64_t check_ns = kAppCheckNs;
  uint64_t last_look = 0;
  {
    std::lock_guard<std::mutex> g(run_mu_);
    fork_gate_.running();
  }
  for (;;) {
    uint64_t now = fast_now_ns();
    const uint64_t app = app_poll_ns_.load(std::memory_order_relaxed);
    const uint64_t app_read = app_read_ns_.load(std::memory_order_relaxed);
    const bool app_polls = app && now - app < kAppPollGraceNs;
    uint64_t next = now + kIdleWakeNs;
    // While the application polls, it reads the sockets and runs due timers
    // itself; this thread then never waits for it (a blocked lock here
    // costs the application a futex wake on its next unlock).
    std::unique_lock<std::mutex> g(run_mu_, std::defer_lock);
    if (app_polls ? g.try_lock() : (g.lock(), true)) {
      // A program may poll its CQ now and then and spin on memory in between
      // (perftest's ib_write_lat): what waits in a socket while it has not
      // read the sockets for kAppActiveNs is taken in here. So is
      // everything when a timer is due: a program that posts and reaps
      // completions without ever finding its CQ empty reads no socket, and
      // an ACK waiting in one is no timeout.
      bool due = false;
      for (NetQp* q : slots_)
        if (q && q->next_deadline() <= now) due = true;
      const bool look = app_polls && (due || now - app_read >= kAppActiveNs);
      if (look || !parked_.empty()) {
        int ready[kMaxEvents];
        const int m = with_parked(ready, look ? readable(ready) : 0);
        if (m) {
          // The ACKs wait, as in a poll: such a program usually answers what
          // came in (a ping-pong), and the ACK then leaves with its request.
          round(ready, m, nullptr, false);
        }
      }
      // Then timers: what is due runs, the earliest of the rest sets the sleep.
      for (NetQp* q : slots_) {
        if (!q) continue;
        // Held back by an application's poll that has not come back (a young
        // one waits for the application's reply, as in catch_up).
        q->flush_acks(app_polls ? now - kAckHoldNs : UINT64_MAX);
        uint64_t d = q->next_deadline();
        if (d <= now) {
          q->on_timer(now);
          d = q->next_deadline();
        }
        if (d < next) next = d;
      }
      if (!parked_.empty()) next = std::min(next, now + kParkedRecheckNs);
      g.unlock();
    }
    // Then this thread sleeps until the next deadline, a kick, or (while the
    // application polls) check_ns: each look at a program that polls its CQ
    // nonstop only takes a core from it (two cores, two spinning programs).
    if (app_polls) {
      // Farther apart while the application keeps reading the sockets
      // itself (it did since the last look); back to kAppCheckNs when not.
      check_ns = app_read > last_look ? std::min(2 * check_ns, kAppCheckMaxNs) : kAppCheckNs;
      last_look = now;
      if (next > now + check_ns) next = now + check_ns;
    } else {
      check_ns = kAppCheckNs;
    }
    planned_wake_.store(next, std::memory_order_relaxed);
    const uint64_t wait = next > now ? next - now : 0;
    timespec ts{time_t(wait / 1000000000ull), long(wait % 1000000000ull)};
    const int n = epoll_pwait2(app_polls ? ep_timers_ : ep_, evs, kMaxEvents, &ts, nullptr);
    if (n <= 0) {
      // Idle: release what the fault injectors hold back.
      if (faults) {
        std::lock_guard<std::mutex> fg(run_mu_);
        for (NetQp* q : slots_)
          if (q) q->flush_link();
      }
      continue;
    }
    int ready[kMaxEvents];
    int m = 0;
    for (int i = 0; i < n; ++i) {
      if (evs[i].data.u32 == UINT32_MAX) {
        uint64_t v;
        ssize_t r = read(wake_, &v, sizeof(v));
        (void)r;
        continue;
      }
      ready[m++] = int(evs[i].data.u32);
    }
    g.lock();
    if (round(ready, m) == 0) continue;
    // Traffic: keep reading without sleeping while packets keep coming (a
    // wake-up per packet costs more than the packet), at most kSpinIdleNs
    // past the last one, and not while the application polls itself.
    g.unlock();
    for (uint64_t last = fast_now_ns(); fast_now_ns() - last < kSpinIdleNs;) {
      const uint64_t app_now = app_poll_ns_.load(std::memory_order_relaxed);
      if (app_now && fast_now_ns() - app_now < kAppPollGraceNs) break;
      std::lock_guard<std::mutex> sg(run_mu_);
      int all[kMaxEvents];
      int k = 0;
      for (size_t i = 0; i < slots_.size() && k < kMaxEvents; ++i)
        if (slots_[i]) all[k++] = int(i);
      if (inbox_used_ && k < kMaxEvents) all[k++] = kInboxTag;
      for (size_t i = 0; i < xdp_.size() && k < kMaxEvents; ++i)
        if (xdp_[i].port) all[k++] = kXdpTag | int(i);
      if (round(all, k) > 0) last = fast_now_ns();
    }
  }
}

}  // namespace uroce::core
