#include "net/raw_switch.h"

#include <sys/uio.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "memory/target.h"
#include "memory/trace.h"

namespace uroce::core {

RawSwitch& RawSwitch::get() {
  static RawSwitch* s = new RawSwitch();  // never destroyed: other statics' destructors may still send
  return *s;
}

Result<uint64_t> RawSwitch::add(uint32_t ifindex, uint32_t qpn, const FlowRule& r, const RssConfig* rss) {
  std::unique_lock<std::shared_mutex> g(mu_);
  std::shared_ptr<Target> t;
  for (const Entry& e : rules_)
    if (e.qpn == qpn) t = e.target;
  if (!t) {
    t = std::make_shared<Target>();
    std::vector<uint32_t> queues{qpn};
    if (rss) {
      t->rss = *rss;
      t->hashed = true;
      queues = rss->wq_qpns;
    }
    for (uint32_t q : queues) {
      auto p = PeerMap::get().resolve(q);
      if (!p.is_ok()) return Status(ENOENT);
      t->sinks.push_back(std::make_unique<Sink>());
      t->sinks.back()->peer = p.value();
    }
    if (t->sinks.empty()) return Status(EINVAL);
    // A raw QP's counters (they live as long as it, as its rules do): its
    // QpShm names them in its (this process's) segment. A UD QP's belong
    // to its network link, which a RESET closes: not counted there.
    if (auto p = PeerMap::get().resolve(qpn); p.is_ok() && p->qp->qp_type == uint32_t(QpType::kRawPacket))
      if (const uint64_t off = p->qp->counters_off.load(std::memory_order_acquire))
        t->counters = &reinterpret_cast<NetCounters*>(p->seg->base + off)->raw;
  }
  const uint64_t h = next_handle_++;
  Entry e{h, ifindex, qpn, r, std::move(t)};
  auto at = std::upper_bound(rules_.begin(), rules_.end(), e, [](const Entry& a, const Entry& b) {
    return a.rule.priority < b.rule.priority;
  });
  rules_.insert(at, std::move(e));
  count_.store(rules_.size(), std::memory_order_relaxed);
  return h;
}

Result<uint64_t> RawSwitch::add_mac(uint32_t ifindex, uint32_t qpn, const uint8_t mac[6]) {
  FlowRule r;
  std::memcpy(r.val.dst_mac, mac, 6);
  std::memset(r.mask.dst_mac, 0xff, 6);
  return add(ifindex, qpn, r);
}

bool RawSwitch::remove(uint64_t handle) {
  std::unique_lock<std::shared_mutex> g(mu_);
  auto it = std::find_if(rules_.begin(), rules_.end(), [&](const Entry& e) { return e.handle == handle; });
  if (it == rules_.end()) return false;
  rules_.erase(it);
  count_.store(rules_.size(), std::memory_order_relaxed);
  return true;
}

std::vector<uint64_t> RawSwitch::remove_qp(uint32_t qpn) {
  std::unique_lock<std::shared_mutex> g(mu_);
  std::vector<uint64_t> gone;
  for (const Entry& e : rules_)
    if (e.qpn == qpn) gone.push_back(e.handle);
  std::erase_if(rules_, [&](const Entry& e) { return e.qpn == qpn; });
  count_.store(rules_.size(), std::memory_order_relaxed);
  return gone;
}

size_t RawSwitch::rules_of(uint32_t qpn) const {
  std::shared_lock<std::shared_mutex> g(mu_);
  return size_t(std::count_if(rules_.begin(), rules_.end(), [&](const Entry& e) { return e.qpn == qpn; }));
}

bool RawSwitch::route(uint32_t ifindex, const wire::FlowKey& k, uint32_t exclude, Targets* to) const {
  auto add = [&](const Entry& e) {
    if (e.qpn == exclude) return;
    for (Target* t : *to)
      if (t == e.target.get()) return;
    to->push_back(e.target.get());
  };
  bool claimed = false, trapped = false;
  bool level_done = false;
  uint16_t level = 0;
  for (const Entry& e : rules_) {
    if (e.ifindex != ifindex || e.rule.type != FlowType::kNormal) continue;
    if (level_done && e.rule.priority != level) break;  // rules_ is in priority order
    if (!wire::flow_matches(k, e.rule.val, e.rule.mask)) continue;
    add(e);
    claimed = true;
    if (!e.rule.dont_trap) {
      trapped = level_done = true;
      level = e.rule.priority;
    }
  }
  if (!claimed) {
    const bool mc = k.layers & wire::kLayerMulticast;
    for (const FlowType ty : {FlowType::kMcDefault, FlowType::kAllDefault}) {
      if (ty == FlowType::kMcDefault && !mc) continue;
      for (const Entry& e : rules_)
        if (e.ifindex == ifindex && e.rule.type == ty) {
          add(e);
          trapped = true;
        }
      if (trapped) break;
    }
  }
  // A sniffer sees both directions.
  for (const Entry& e : rules_)
    if (e.ifindex == ifindex && e.rule.type == FlowType::kSniffer) add(e);
  return trapped;
}

void RawSwitch::deliver(Target* t, const wire::FlowKey& k, std::span<const uint8_t> frame) {
  Sink* s = t->sinks[0].get();
  if (t->hashed) {
    const uint32_t h = rss_hash(k, t->rss.fields, t->rss.key, t->rss.key_len);
    s = t->sinks[h % t->sinks.size()].get();
  }
  iovec v{const_cast<uint8_t*>(frame.data()), frame.size()};
  RecvMeta m{};
  Resp r;
  {
    std::lock_guard<SpinLock> g(s->mu);
    r = respond_send(s->peer, &v, 1, frame.size(), m, nullptr);
  }
  if (r == Resp::kOk) {
    stats_.delivered.fetch_add(1, std::memory_order_relaxed);
    if (t->counters) {
      count_add(&t->counters->received, 1);
      count_add(&t->counters->received_bytes, frame.size());
    }
  } else {
    stats_.dropped.fetch_add(1, std::memory_order_relaxed);
    if (t->counters) count_add(&t->counters->dropped, 1);
    if (tracing())
      trace(s->peer.qpn, "raw frame of %zu bytes dropped (no receive, or not receiving)", frame.size());
  }
}

void RawSwitch::sent(uint32_t ifindex, uint32_t from_qpn, std::span<const uint8_t> frame) {
  if (!any()) return;
  const wire::FlowKey k = wire::flow_key_of(frame);
  Targets to;
  std::shared_lock<std::shared_mutex> g(mu_);
  route(ifindex, k, from_qpn, &to);
  for (Target* t : to) deliver(t, k, frame);
}

bool RawSwitch::received(uint32_t ifindex, std::span<const uint8_t> frame) {
  if (!any()) return false;
  const wire::FlowKey k = wire::flow_key_of(frame);
  Targets to;
  std::shared_lock<std::shared_mutex> g(mu_);
  const bool trapped = route(ifindex, k, 0, &to);
  for (Target* t : to) deliver(t, k, frame);
  return trapped;
}

}  // namespace uroce::core
