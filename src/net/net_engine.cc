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
#include "memory/notify.h"
#include "memory/peer_map.h"
#include "net/net_engine_tuning.h"
#include "net/raw_engine.h"
#include "net/raw_switch.h"
#include "net/ud_forward.h"
#include "wire/cm_mad.h"

namespace uroce::core {

using namespace tuning;

namespace {

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
  sources_.clear();
  n_qps_ = 0;
  parked_.clear();
  raw_queues_.clear();  // the parent's QPs' queues
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
  xdp_watched_ = true;
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
    if (const char* c = getenv("UROCE_CC"); c && *c) {
      if (strcmp(c, "0") == 0)
        settings_.cc.enabled = false;
      else if (strcmp(c, "1") != 0)
        UROCE_ERR("UROCE_CC=%s: not understood (0 or 1); congestion control on", c);
    }
    if (const char* c = getenv("UROCE_SR"); c && *c) {
      if (strcmp(c, "0") == 0)
        settings_.selective = false;
      else if (strcmp(c, "1") != 0)
        UROCE_ERR("UROCE_SR=%s: not understood (0 or 1); selective repeat on", c);
    }
    // Variable `name`'s value `t`, a duration in microseconds within
    // [lo, 10 s], into *ns; else an error and *ns as it was.
    auto micros = [](const char* name, const char* t, unsigned long lo, uint64_t* ns) {
      if (!t || !*t) return;
      char* end = nullptr;
      const unsigned long us = strtoul(t, &end, 10);
      if (*end == 0 && us >= lo && us <= 10'000'000)
        *ns = uint64_t(us) * 1000;
      else
        UROCE_ERR("%s=%s: not understood (%lu to 10000000); %llu", name, t, lo,
                  (unsigned long long)(*ns / 1000));
    };
    micros("UROCE_CC_TARGET_US", getenv("UROCE_CC_TARGET_US"), 1, &settings_.cc.target_queue_ns);
    micros("UROCE_REORDER_US", getenv("UROCE_REORDER_US"), 0, &settings_.reorder_ns);
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

int NetEngine::add_source(const Source& s) {
  size_t i = 0;
  while (i < sources_.size() && sources_[i].kind != Source::Kind::kFree) ++i;
  if (i == sources_.size()) sources_.push_back({});
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = uint32_t(i);
  if ((s.kind != Source::Kind::kXdp || xdp_watched_) && epoll_ctl(ep_, EPOLL_CTL_ADD, s.src->fd(), &ev) != 0)
    return -1;
  sources_[i] = s;
  return int(i);
}

void NetEngine::drop_source(size_t i) {
  if (sources_[i].kind != Source::Kind::kXdp || xdp_watched_)
    epoll_ctl(ep_, EPOLL_CTL_DEL, sources_[i].src->fd(), nullptr);
  sources_[i] = Source{};
}

void NetEngine::watch_xdp(bool on) {
  if (on == xdp_watched_) return;
  xdp_watched_ = on;
  for (size_t i = 0; i < sources_.size(); ++i) {
    if (sources_[i].kind != Source::Kind::kXdp) continue;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = uint32_t(i);
    // Added back: a frame already on the ring makes the socket ready at once.
    epoll_ctl(ep_, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, sources_[i].src->fd(), &ev);
  }
}

Status NetEngine::start() {
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
      (void)add_source(Source{Source::Kind::kInbox, inbox_.get(), nullptr});
    } else {
      UROCE_WARN("no inbox for packets other processes get for this one's QPs (%s)", strerror(in.err()));
    }
    started_ = true;
    fork_gate_.starting();
    std::thread([this] { loop(); }).detach();
  }
  return Status::ok();
}

Status NetEngine::add(NetQp* q) {
  std::lock_guard<std::mutex> g(run_mu_);
  if (Status st = start(); !st.is_ok()) return st;
  if (add_source(Source{Source::Kind::kQp, &q->rx(), q}) < 0) return Status(errno);
  by_qpn_[q->qpn()] = q;
  ++n_qps_;
  n_active_.fetch_add(1, std::memory_order_relaxed);
  return Status::ok();
}

Status NetEngine::add_raw() {
  std::lock_guard<std::mutex> g(run_mu_);
  if (Status st = start(); !st.is_ok()) return st;
  // The ports lent before the engine started are read from now on.
  for (const Xdp& x : xdp_)
    if (x.port && std::none_of(sources_.begin(), sources_.end(),
                               [&](const Source& s) { return s.src == x.port.get(); }))
      (void)add_source(Source{Source::Kind::kXdp, x.port.get(), nullptr});
  n_active_.fetch_add(1, std::memory_order_relaxed);
  return Status::ok();
}

void NetEngine::raw_frame_queued() { kick(fast_now_ns() + kRawKickNs); }

void NetEngine::add_raw_queue(RawEngine* e) {
  std::lock_guard<std::mutex> g(run_mu_);
  if (std::find(raw_queues_.begin(), raw_queues_.end(), e) == raw_queues_.end()) raw_queues_.push_back(e);
}

void NetEngine::remove_raw_queue(RawEngine* e) {
  std::lock_guard<std::mutex> g(run_mu_);
  std::erase(raw_queues_, e);
}

uint64_t NetEngine::pump_raw_queues(uint64_t now) {
  uint64_t next = UINT64_MAX;
  for (RawEngine* e : raw_queues_) next = std::min(next, e->pump(now));
  return next;
}

void NetEngine::flush_raw_tx(uint64_t now) {
  for (const Xdp& x : xdp_)
    if (x.port && x.port->tx_pending(now)) x.port->flush();
}

void NetEngine::remove_raw() {
  std::lock_guard<std::mutex> g(run_mu_);
  if (n_active_.fetch_sub(1, std::memory_order_relaxed) == 1) log_forwarded();
}

void NetEngine::remove(NetQp* q) {
  std::lock_guard<std::mutex> g(run_mu_);
  for (size_t i = 0; i < sources_.size(); ++i) {
    if (sources_[i].qp != q) continue;
    if (sources_[i].kind == Source::Kind::kQp) {
      --n_qps_;
      n_active_.fetch_sub(1, std::memory_order_relaxed);
    }
    drop_source(i);
  }
  auto it = by_qpn_.find(q->qpn());
  if (it != by_qpn_.end() && it->second == q) by_qpn_.erase(it);
  if (n_active_.load(std::memory_order_relaxed) == 0) log_forwarded();
}

void NetEngine::log_forwarded() {
  // What the AF_XDP ports dropped so far (the frames no QP of this
  // process could take: a well-formed one for a QP gone counts in
  // inbox_lost_ below).
  for (const Xdp& x : xdp_) {
    if (!x.port) continue;
    const link::XdpPort::Stats& s = x.port->stats();
    const uint64_t ring = x.port->ring_dropped();
    if (s.bad_icrc + s.malformed + s.not_roce + s.send_full + ring)
      UROCE_INFO(
          "AF_XDP port of interface %u: %llu frames received, %llu sent (raw QPs: %llu received, %llu "
          "sent); dropped: %llu bad ICRC, %llu malformed, %llu not RoCE v2, %llu by the kernel (rings "
          "full), %llu not sent (send frames in flight)",
          x.ifindex, (unsigned long long)s.received, (unsigned long long)s.sent,
          (unsigned long long)s.raw_received, (unsigned long long)s.raw_sent, (unsigned long long)s.bad_icrc,
          (unsigned long long)s.malformed, (unsigned long long)s.not_roce, (unsigned long long)ring,
          (unsigned long long)s.send_full);
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
    o.ecn = link.cc.enabled;  // as the UDP link's (net/net_qp_open.cc)
    // Frames the flow rules of this process's RAW_PACKET QPs claim (uroced's
    // program steers them here too) go to those QPs.
    o.raw = [ifindex = d.ifindex](std::span<const uint8_t> f) {
      return RawSwitch::get().received(ifindex, f);
    };
    o.raw_rules = &RawSwitch::get().rule_count();
    x.port = std::make_unique<link::XdpPort>(std::move(xsk.value()), o);
  }
  if (why)
    UROCE_INFO("%s: RoCE v2 through UDP sockets, not AF_XDP: %s%s%s", d.name, why, err ? ": " : "",
               err ? strerror(err) : "");
  else if (x.port)
    UROCE_INFO("%s: RoCE v2 through an AF_XDP socket on %s", d.name, d.ifname);
  link::XdpPort* port = x.port.get();
  std::lock_guard<std::mutex> r(run_mu_);
  if (port && ep_ >= 0) (void)add_source(Source{Source::Kind::kXdp, port, nullptr});
  xdp_.push_back(std::move(x));
  return port;
}

Status NetEngine::add_socket(NetQp* q, link::UdpEndpoint* ep, bool multicast) {
  std::lock_guard<std::mutex> g(run_mu_);
  if (add_source(Source{multicast ? Source::Kind::kGroup : Source::Kind::kAddress, ep, q}) < 0)
    return Status(errno);
  return Status::ok();
}

void NetEngine::remove_socket(link::UdpEndpoint* ep) {
  std::lock_guard<std::mutex> g(run_mu_);
  for (size_t i = 0; i < sources_.size(); ++i)
    if (sources_[i].kind != Source::Kind::kFree && sources_[i].src == ep) drop_source(i);
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
  int m = 0;
  // The AF_XDP ports while epoll does not watch them: looked at directly
  // (a ring's load, no system call).
  if (!xdp_watched_)
    for (size_t i = 0; i < sources_.size() && m < kMaxEvents; ++i)
      if (sources_[i].kind == Source::Kind::kXdp) ready[m++] = int(i);
  const int n = epoll_wait(ep_, evs, kMaxEvents - m, 0);
  for (int i = 0; i < n; ++i)
    if (evs[i].data.u32 != UINT32_MAX) ready[m++] = int(evs[i].data.u32);
  return m;
}

int NetEngine::pick(Reader who, int* ready, bool* skipped) {
  using Kind = Source::Kind;
  const bool app = who == Reader::kApplication;
  // An application's poll reads the QPs' other sockets, and the UDP socket
  // of a QP whose frames come through an AF_XDP port (what came before the
  // steering), only every kExtraReadEvery-th time: each is a receive call
  // more per poll, and most carry little. (Left unread, a steered QP's
  // socket still counts as drained: after the steering nothing comes to
  // it, as to an inbox that never had anything.)
  const bool extras = app && ++direct_polls_ % kExtraReadEvery == 0;
  *skipped = false;
  int n = 0;
  auto take = [&](size_t i) {
    if (n < kMaxEvents) ready[n++] = int(i);
  };
  // The AF_XDP ports first: looking at a ring is a load, no system call.
  for (size_t i = 0; i < sources_.size(); ++i)
    if (sources_[i].kind == Kind::kXdp) take(i);
  for (size_t i = 0; i < sources_.size(); ++i)
    if (sources_[i].kind == Kind::kQp && (!app || !sources_[i].qp->on_xdp() || extras)) take(i);
  if (app)
    for (size_t i = 0; i < sources_.size(); ++i)
      if (sources_[i].kind == Kind::kGroup || sources_[i].kind == Kind::kAddress) {
        if (extras)
          take(i);
        else
          *skipped = true;
      }
  // The inbox: once packets came through it, every time; before that, an
  // application's poll now and then (an inbox left unread that never had
  // any still leaves the poll drained), and never while the process has no
  // network QP for other processes to pass packets to (raw QPs only: their
  // frames come through the AF_XDP port, and a receive call that finds
  // nothing is time a raw ping-pong waits, bench/RESULTS.md).
  const bool inbox = inbox_used_ || (app && n_qps_ > 0 && direct_polls_ % kIdleInboxReadEvery == 0);
  for (size_t i = 0; i < sources_.size(); ++i)
    if (sources_[i].kind == Kind::kInbox && inbox) take(i);
  return n;
}

void NetEngine::track_parked(size_t i) {
  auto it = std::find(parked_.begin(), parked_.end(), int(i));
  const bool parked = sources_[i].kind != Source::Kind::kFree && sources_[i].src->parked();
  if (parked && it == parked_.end()) parked_.push_back(int(i));
  if (!parked && it != parked_.end()) parked_.erase(it);
}

int NetEngine::with_parked(int* ready, int n) const {
  for (int i : parked_)
    if (n < kMaxEvents && std::find(ready, ready + n, i) == ready + n) ready[n++] = i;
  return n;
}

int NetEngine::round(const int* ready, int n, bool* drained, bool ack_per_batch) {
  using Kind = Source::Kind;
  int got = 0;
  if (drained) *drained = true;
  // With ack_per_batch, the plain ACKs a batch of datagrams causes are held
  // and sent when the batch is handled: one cumulative ACK per QP per batch
  // instead of one (and one system call) per message. Without it they are
  // held for the application's next post or poll, unless the batch wakes
  // the application from a completion channel.
  struct Batch {
    NetEngine* e;
    NetQp* owner = nullptr;   // the socket's QP: most packets are for it
    bool group = false;       // the socket is a multicast group's, of `owner`
    bool never_pass = false;  // the packets come from the inbox or a port: never passed on
    bool xdp = false;         // ... from an AF_XDP port (counted per QP)
    int nt = 0;
    bool overflow = false;
    NetQp* touched[kMaxTouched];  // [0, nt) only
  } b;
  b.e = this;
  // The round's completion events wake the application once all its packets
  // are handled and their ACKs have left (memory/notify.h: a reply and its
  // request's ACK often arrive together; an ACK still held when the
  // application posts its next request would leave after it).
  const NotifyBatch events;
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
        // (UD: net/ud_forward.h; the others: contract/inbox.h), or nobody's.
        if (c->never_pass)
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
    if (c->nt && c->touched[c->nt - 1] == q) return;
    if (c->nt < kMaxTouched)
      c->touched[c->nt++] = q;
    else
      c->overflow = true;
  };
  // What was passed on to other processes leaves with the batch's ACKs.
  auto flush_passed = [this] {
    if (const uint64_t lost = forwarder_.flush()) {
      passed_[size_t(NetForward::kPassed)].fetch_sub(lost, std::memory_order_relaxed);
      passed_[size_t(NetForward::kFull)].fetch_add(lost, std::memory_order_relaxed);
    }
  };
  auto send_acks = [&] {
    if (b.overflow) {
      for (const Source& s : sources_)
        if (s.kind == Kind::kQp) s.qp->flush_acks();
    } else {
      for (int i = 0; i < b.nt; ++i) b.touched[i]->flush_acks();
    }
    b.nt = 0;
    b.overflow = false;
  };
  for (int i = 0; i < n; ++i) {
    const int at = ready[i];
    if (at < 0 || size_t(at) >= sources_.size() || sources_[size_t(at)].kind == Kind::kFree) {
      // A source gone since its packets were parked (its QP was destroyed).
      parked_.erase(std::remove(parked_.begin(), parked_.end(), at), parked_.end());
      continue;
    }
    const Source s = sources_[size_t(at)];
    b.owner = s.qp;
    b.group = s.kind == Kind::kGroup;
    b.never_pass = s.kind == Kind::kInbox || s.kind == Kind::kXdp;
    b.xdp = s.kind == Kind::kXdp;
    // A socket is read again while its reads come back full (up to
    // kMaxRoundsPerSocket); an inbox or a port once per round.
    const bool socket = s.kind == Kind::kQp || s.kind == Kind::kGroup || s.kind == Kind::kAddress;
    const int rounds = socket ? kMaxRoundsPerSocket : 1;
    for (int r = 0;; ++r) {
      bool more = false;
      const int k = s.src->poll(dispatch, link::UdpEndpoint::kBatch, &more);
      if (s.may_pass_on()) flush_passed();
      // Held ACKs wait for the application's next post only while it polls:
      // one that the batch wakes from a completion channel gets its reply
      // out after them.
      if (ack_per_batch || events.raised()) {
        send_acks();
      } else {
        b.nt = 0;  // (send_acks starts the next batch's list itself)
        b.overflow = false;
      }
      got += k;
      if (s.kind == Kind::kInbox && k) inbox_used_ = true;
      // A short read: more may wait (a single datagram read from a quiet
      // socket), but the next round reads them (the one in hand goes to
      // its QP first).
      if (k < link::UdpEndpoint::kBatch) {
        if (more && drained) *drained = false;
        break;
      }
      if (r + 1 == rounds) {
        if (drained) *drained = false;
        break;
      }
    }
    track_parked(size_t(at));
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
  // else would send them soon. A younger one waits for the post that
  // usually follows a posted receive (a ping-pong's reply): both leave in
  // one system call.
  const uint64_t held_before = fast_now_ns() - kAckHoldNs;
  for (const Source& s : sources_)
    if (s.kind == Source::Kind::kQp) s.qp->flush_acks(held_before);
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
    // through the rest of a scheduler slice.
    __attribute__((tls_model("initial-exec"))) static thread_local unsigned busy = 0;
    if (++busy % 16 == 0) sched_yield();
    return false;
  }
  if (!raw_queues_.empty()) (void)pump_raw_queues(now);
  flush_raw_tx(now);
  app_read_ns_.store(now, std::memory_order_relaxed);
  for (const Source& s : sources_)
    if (s.kind == Source::Kind::kQp)
      s.qp->flush_acks(now - kPollAckHoldNs);  // what an earlier poll held back
  // Which sources to read: with a few QPs, each directly (a receive call
  // finds nothing quickly); with more, those one epoll_wait says are readable.
  int ready[kMaxEvents];
  bool skipped = false;  // sources left unread this time
  int n = n_qps_ <= kDirectReadSockets ? pick(Reader::kApplication, ready, &skipped) : readable(ready);
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
  bool window_full = false;
  for (const Source& s : sources_)
    if (s.kind == Source::Kind::kQp) {
      if (s.qp->next_deadline() <= now) s.qp->on_timer(now);
      window_full = window_full || s.qp->window_full();
    }
  // Waiting for ACKs only: the core is better spent on whoever sends them
  // (on a host with few cores, often the receiver of this traffic).
  window_empty_polls_ = got > 0 || !window_full ? 0 : window_empty_polls_ + 1;
  const bool yield = window_empty_polls_ >= kWindowYieldAfter && window_empty_polls_ % kWindowYieldEvery == 0;
  g.unlock();
  if (yield) sched_yield();
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
      // While the application polls, epoll does not watch the AF_XDP
      // sockets: the application reads their rings, and a watched socket
      // costs every frame the kernel delivers an epoll callback (on the
      // sender's core, inside its send), and this thread's looks a wake.
      watch_xdp(!app_polls);
      // A program may poll its CQ now and then and spin on memory in between
      // (perftest's ib_write_lat): what waits in a socket while it has not
      // read the sockets for kAppActiveNs is taken in here. So is
      // everything when a timer is due: a program that posts and reaps
      // completions without ever finding its CQ empty reads no socket, and
      // an ACK waiting in one is no timeout.
      bool due = false;
      for (const Source& s : sources_)
        if (s.kind == Source::Kind::kQp && s.qp->next_deadline() <= now) due = true;
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
      for (const Source& s : sources_) {
        if (s.kind != Source::Kind::kQp) continue;
        NetQp* q = s.qp;
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
      if (!raw_queues_.empty()) next = std::min(next, pump_raw_queues(now));
      flush_raw_tx(now);
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
        for (const Source& s : sources_)
          if (s.kind == Source::Kind::kQp) s.qp->flush_link();
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
      bool skipped = false;
      const int k = pick(Reader::kSpinning, all, &skipped);
      if (round(all, k) > 0) last = fast_now_ns();
    }
  }
}

}  // namespace uroce::core
