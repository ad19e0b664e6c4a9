// The identifications uroced saw on the wire: a table in shared memory that
// uroced writes (daemon/frame_watch.cc) and every client of it reads.
//
// A datagram socket does not see the IPv4 header, yet the ICRC covers its
// identification, which a peer other than uroce (kernel rxe, a RoCE NIC)
// fills from a counter the receiver cannot predict for a flow's first
// packet (docs/network-link.md "The IPv4 identification"). uroced, which
// may hold CAP_NET_RAW where the application does not, reads the headers
// of such frames on a packet socket and records, per packet, the
// identification the frame carried. A receiver that solved its packet's
// ICRC for identification x believes x if the frame with the same
// addresses, source port, destination QP and PSN carried x: the ICRC is
// then checked in full over the header the peer sent.
//
// One writer (uroced's loop), any number of readers; each entry under a
// seqlock. Direct-mapped by the packet's key: a newer packet with a key of
// the same slot replaces an older one (a reader then finds no entry and the
// packet waits, or is dropped, as unproven).
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

namespace uroce::link {

/// What identifies one packet on the wire (addresses in network order).
struct IdKey {
  uint32_t saddr = 0, daddr = 0;
  uint16_t sport = 0;
  uint32_t dqp = 0, psn = 0;  // from the BTH
};

struct IdWatchEntry {
  /// Seqlock: the writer makes it odd, rewrites, makes it even (release);
  /// readers load (acquire), copy and load it again.
  std::atomic<uint32_t> seq;
  uint32_t saddr, daddr;
  uint16_t sport, id;
  uint32_t dqp, psn;
  uint32_t pad[2];
};
static_assert(sizeof(IdWatchEntry) == 32 && std::is_standard_layout_v<IdWatchEntry>);

struct IdWatchTable {
  static constexpr uint64_t kMagic = 0x3148435441574449ull;  // "IDWATCH1"
  static constexpr uint32_t kSlots = 16384;                  // a power of two
  uint64_t magic;
  /// 1 while uroced reads frames (it has a packet socket): a packet left
  /// unproven may still be vouched for. Stored (release) by the writer.
  std::atomic<uint32_t> watching;
  uint32_t pad[13];
  IdWatchEntry e[kSlots];
};
static_assert(std::is_standard_layout_v<IdWatchTable>);

inline uint32_t id_watch_slot(const IdKey& k) {
  uint64_t h = (uint64_t(k.saddr) << 32 | k.daddr) * 0x9e3779b97f4a7c15ull;
  h ^= (uint64_t(k.sport) << 48 | uint64_t(k.dqp) << 24 | k.psn) * 0xc2b2ae3d27d4eb4full;
  h ^= h >> 29;
  return uint32_t(h) & (IdWatchTable::kSlots - 1);
}

/// The writer's side (uroced): records that the packet `k` carried `id`.
inline void id_watch_put(IdWatchTable* t, const IdKey& k, uint16_t id) {
  IdWatchEntry& e = t->e[id_watch_slot(k)];
  const uint32_t s = e.seq.load(std::memory_order_relaxed);
  e.seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // the odd seq before the fields
  e.saddr = k.saddr;
  e.daddr = k.daddr;
  e.sport = k.sport;
  e.id = id;
  e.dqp = k.dqp;
  e.psn = k.psn;
  e.seq.store(s + 2, std::memory_order_release);  // pairs with id_watch_get's acquire
}

enum class IdSeen {
  kUnknown,  // no frame with this key recorded (yet)
  kSame,     // the frame carried this identification
  kOther,    // the newest frame with this key carried another one
};

/// The reader's side: what uroced recorded for packet `k` against `id`.
inline IdSeen id_watch_get(const IdWatchTable* t, const IdKey& k, uint16_t id) {
  const IdWatchEntry& e = t->e[id_watch_slot(k)];
  for (int tries = 0; tries < 64; ++tries) {
    const uint32_t s1 = e.seq.load(std::memory_order_acquire);  // pairs with id_watch_put's release
    if (s1 & 1) continue;
    const bool same_key =
        e.saddr == k.saddr && e.daddr == k.daddr && e.sport == k.sport && e.dqp == k.dqp && e.psn == k.psn;
    const uint16_t seen = e.id;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.seq.load(std::memory_order_relaxed) != s1) continue;
    if (!same_key || s1 == 0) return IdSeen::kUnknown;
    return seen == id ? IdSeen::kSame : IdSeen::kOther;
  }
  return IdSeen::kUnknown;
}

/// This process's table (mapped read-only from uroced), or null without one.
const IdWatchTable* id_watch();
void set_id_watch(const IdWatchTable* t);

}  // namespace uroce::link
