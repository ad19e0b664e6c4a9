// Where each QP number of the host lives: a table in shared memory that
// uroced writes (daemon/registry.cc, as it hands out and frees QPNs) and
// every client of it maps read-only (ControlClient::map_qp_directory).
//
// A process that moves a QP to RTR, or sends a datagram, needs the target
// QP's place: the owner's context and the QP's offset in its segment
// (memory/peer_map.h). Asking uroced costs a round trip through two processes
// on every new peer QP — the largest part of a connection's set-up through
// the CM. The table answers without one when the owner's segment is
// already mapped here; a miss, or an owner not mapped yet, asks uroced as
// before (which also passes the segment's descriptor).
//
// A hint, never trusted alone: what it names is checked as an answer of
// uroced's is (the offset inside the segment, the QP's magic and number
// there). Direct-mapped by the QPN's low bits (QPNs are random): a QPN
// whose slot another took is simply a miss. One writer (uroced's loop),
// any number of readers; each entry under a seqlock.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

namespace uroce::core {

struct QpDirEntry {
  /// Seqlock: the writer makes it odd, rewrites, makes it even (release);
  /// readers load (acquire), copy and load it again.
  std::atomic<uint32_t> seq;
  uint32_t qpn;  // 0: free
  uint32_t ctx_id;
  int32_t pid;
  uint64_t off;  // the QpShm (or an XRC SRQ's RqRing) in the owner's segment
  uint32_t is_srq;
  uint32_t pad;
};
static_assert(sizeof(QpDirEntry) == 32 && std::is_standard_layout_v<QpDirEntry>);

struct QpDirectory {
  static constexpr uint64_t kMagic = 0x3152494450514355ull;  // "UCQPDIR1"
  // A power of two; 256 KiB in all, faulted in once by uroced and by each
  // client as it maps the table (a first touch on the fast path costs a
  // page fault, which on a VM is several microseconds).
  static constexpr uint32_t kSlots = 1u << 13;
  uint64_t magic;
  uint32_t pad[14];
  QpDirEntry e[kSlots];
};
static_assert(std::is_standard_layout_v<QpDirectory>);

/// What the table says about a QPN (found: the fields are a consistent copy).
struct QpDirHit {
  bool found = false;
  uint32_t ctx_id = 0;
  int32_t pid = 0;
  uint64_t off = 0;
  bool is_srq = false;
};

/// The writer's side (uroced): `qpn` now lives at `off` of context `ctx_id`
/// of process `pid` (or, with pid 0, is gone: its slot is cleared if it
/// still holds it).
inline void qp_dir_put(QpDirectory* t, uint32_t qpn, uint32_t ctx_id, int32_t pid, uint64_t off,
                       bool is_srq) {
  QpDirEntry& e = t->e[qpn & (QpDirectory::kSlots - 1)];
  if (pid == 0 && e.qpn != qpn) return;
  const uint32_t s = e.seq.load(std::memory_order_relaxed);
  e.seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // the odd seq before the fields
  std::atomic_ref<uint32_t>(e.qpn).store(pid ? qpn : 0, std::memory_order_relaxed);
  std::atomic_ref<uint32_t>(e.ctx_id).store(ctx_id, std::memory_order_relaxed);
  std::atomic_ref<int32_t>(e.pid).store(pid, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(e.off).store(off, std::memory_order_relaxed);
  std::atomic_ref<uint32_t>(e.is_srq).store(is_srq ? 1 : 0, std::memory_order_relaxed);
  e.seq.store(s + 2, std::memory_order_release);  // pairs with qp_dir_get's acquire
}

/// The reader's side.
inline QpDirHit qp_dir_get(const QpDirectory* t, uint32_t qpn) {
  const QpDirEntry& e = t->e[qpn & (QpDirectory::kSlots - 1)];
  for (int tries = 0; tries < 64; ++tries) {
    const uint32_t s1 = e.seq.load(std::memory_order_acquire);  // pairs with qp_dir_put's release
    if (s1 & 1) continue;
    QpDirHit h;
    const uint32_t have = std::atomic_ref<const uint32_t>(e.qpn).load(std::memory_order_relaxed);
    h.ctx_id = std::atomic_ref<const uint32_t>(e.ctx_id).load(std::memory_order_relaxed);
    h.pid = std::atomic_ref<const int32_t>(e.pid).load(std::memory_order_relaxed);
    h.off = std::atomic_ref<const uint64_t>(e.off).load(std::memory_order_relaxed);
    h.is_srq = std::atomic_ref<const uint32_t>(e.is_srq).load(std::memory_order_relaxed) != 0;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.seq.load(std::memory_order_relaxed) != s1) continue;
    h.found = have == qpn && qpn != 0;
    return h;
  }
  return {};
}

/// This process's table (mapped read-only from uroced), or null without one.
const QpDirectory* qp_directory();
void set_qp_directory(const QpDirectory* t);

}  // namespace uroce::core
