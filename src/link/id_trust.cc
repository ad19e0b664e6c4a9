#include "link/id_trust.h"

#include <algorithm>
#include <atomic>

namespace uroce::link {

namespace {

std::atomic<const IdWatchTable*> g_watch{nullptr};

IdKey key_of(std::span<const uint8_t> p, uint32_t saddr, uint16_t sport, uint32_t daddr) {
  // BTH: destination QP in bytes 5-7, PSN in 9-11 (the caller checked the length).
  IdKey k;
  k.saddr = saddr;
  k.daddr = daddr;
  k.sport = sport;
  k.dqp = uint32_t(p[5]) << 16 | uint32_t(p[6]) << 8 | p[7];
  k.psn = uint32_t(p[9]) << 16 | uint32_t(p[10]) << 8 | p[11];
  return k;
}

/// `later` is at most `n` steps after `earlier` (and not equal).
bool within_after(uint16_t earlier, uint16_t later, uint16_t n) {
  const uint16_t d = uint16_t(later - earlier);
  return d >= 1 && d <= n;
}

}  // namespace

const IdWatchTable* id_watch() { return g_watch.load(std::memory_order_acquire); }
void set_id_watch(const IdWatchTable* t) { g_watch.store(t, std::memory_order_release); }

IdTrust::Counter* IdTrust::find(uint32_t saddr, uint16_t sport, uint32_t dqp) {
  for (Counter& c : counters_)
    if (c.known && c.saddr == saddr && c.sport == sport && c.dqp == dqp) return &c;
  return nullptr;
}

void IdTrust::note(const IdKey& k, uint16_t id, bool force) {
  const uint16_t next = uint16_t(id + 1);
  for (int host = 0; host < 2; ++host) {
    const uint16_t sport = host ? 0 : k.sport;
    const uint32_t dqp = host ? kHostQp : k.dqp;
    Counter* c = find(k.saddr, sport, dqp);
    if (!c) {
      c = &counters_[victim_];
      victim_ = (victim_ + 1) % kCounters;
      *c = Counter{k.saddr, sport, dqp, next, true};
    } else if (force || uint16_t(next - c->next) < 0x8000) {
      c->next = next;  // only forward, unless uroced saw it
    }
  }
}

bool IdTrust::continues(const IdKey& k, uint16_t id) {
  for (int host = 0; host < 2; ++host) {
    const Counter* c = host ? find(k.saddr, 0, kHostQp) : find(k.saddr, k.sport, k.dqp);
    if (!c) continue;
    if (uint16_t(id - c->next) < kAhead || uint16_t(c->next - id) <= kBehind) {
      note(k, id, false);
      return true;
    }
  }
  return false;
}

void IdTrust::hand_on(Parked& p, Deliver deliver) {
  deliver({p.bytes.data(), p.bytes.size()}, p.key.saddr, p.key.sport, p.id);
}

void IdTrust::release_proven(Deliver deliver) {
  size_t out = 0;
  for (size_t i = 0; i < parked_.size(); ++i) {
    Parked& p = parked_[i];
    if (p.proven) {
      ++stats_->succeeded;
      hand_on(p, deliver);
    } else {
      if (out != i) parked_[out] = std::move(p);
      ++out;
    }
  }
  parked_.erase(parked_.begin() + ptrdiff_t(out), parked_.end());
}

void IdTrust::judge(std::span<const uint8_t> pkt, uint32_t saddr, uint16_t sport, uint32_t daddr, uint16_t id,
                    uint64_t now_ns, Deliver deliver) {
  if (id < kOwnIds) {
    deliver(pkt, saddr, sport, id);
    return;
  }
  const IdKey k = key_of(pkt, saddr, sport, daddr);
  // This is the next packet of its host for those of its parked packets
  // still waiting for theirs: it proves them if it continues them closely
  // (the two then prove each other); otherwise their chance is gone. (Any
  // later packet would do: a corrupted one that solves for a random value
  // would then be proven by one of the many that follow it.)
  bool proves = false;
  for (Parked& p : parked_) {
    if (!p.open || p.key.saddr != saddr) continue;
    p.open = false;
    if (within_after(p.id, id, kSuccessor)) p.proven = proves = true;
  }
  bool believed = continues(k, id);
  const IdWatchTable* w = id_watch();
  if (!believed && w && id_watch_get(w, k, id) == IdSeen::kSame) {
    ++stats_->vouched;
    note(k, id, true);
    believed = true;
  }
  if (!believed && proves) {
    note(k, id, true);
    believed = true;
  }
  if (proves) release_proven(deliver);
  if (believed) {
    deliver(pkt, saddr, sport, id);
    return;
  }
  // No evidence yet (a flow's first packet from a peer whose counter is
  // unknown, or a corrupted packet): wait for uroced's record or the next packet.
  if (parked_.size() == kMaxParked) {
    ++stats_->unproven;
    parked_.erase(parked_.begin());
  }
  ++stats_->parked;
  const bool watched = w && w->watching.load(std::memory_order_acquire);  // pairs with uroced's release
  parked_.push_back(Parked{std::vector<uint8_t>(pkt.begin(), pkt.end()), k, id,
                           now_ns + (watched ? kWaitWatchedNs : kWaitNs)});
}

void IdTrust::recheck(uint64_t now_ns, Deliver deliver) {
  const IdWatchTable* w = id_watch();
  size_t out = 0;
  for (size_t i = 0; i < parked_.size(); ++i) {
    Parked& p = parked_[i];
    // Only uroced's record of the frame: a counter followed since has moved
    // on, and being near its later values proves nothing of an old packet
    // (a corrupted one solves for a random value, which a busy counter
    // reaches within the wait).
    const bool go = w && id_watch_get(w, p.key, p.id) == IdSeen::kSame;
    if (go) {
      ++stats_->vouched;
      note(p.key, p.id, true);
    }
    if (go) {
      hand_on(p, deliver);
    } else if (p.deadline <= now_ns) {
      ++stats_->unproven;
    } else {
      if (out != i) parked_[out] = std::move(p);
      ++out;
    }
  }
  parked_.erase(parked_.begin() + ptrdiff_t(out), parked_.end());
}

}  // namespace uroce::link
