// Structures that live in shared memory and are read or written by more than
// one process. Rules: standard layout, fixed-size fields, offsets instead of
// pointers, every cross-process atomic names the operation it pairs with.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/clock.h"
#include "contract/types.h"
#include "link/shm_link.h"

namespace uroce::core {

constexpr size_t kCacheLine = 64;
constexpr uint64_t kSegMagic = 0x3147455345434f52ull;  // "ROCESEG1"
constexpr uint32_t kQpMagic = 0x51505348;              // "QPSH"
/// Address space reserved for each context segment, in every process that maps it.
/// The memfd grows inside it, so offsets never move and peers never remap.
constexpr size_t kSegReserveBytes = 8ull << 30;

/// Offset 0 of every context segment (one per ibv_open_device).
struct alignas(kCacheLine) SegHeader {
  uint64_t magic;
  uint32_t ctx_id;  // assigned by uroced
  int32_t owner_pid;
  /// 1 while the owner lives. Cleared by uroced when the owner's control
  /// socket closes; peers load it (acquire) before and after each operation.
  std::atomic<uint32_t> alive;
  uint32_t mr_capacity;
  uint64_t mr_table_off;
  uint64_t arena_off;
  /// A process-shared robust pthread mutex held by the owner's service thread
  /// for the owner's lifetime. When the owner dies the kernel marks its futex
  /// word FUTEX_OWNER_DIED during exit, before the process is even a zombie
  /// and before uroced can notice, so peers see the death with one load.
  alignas(8) uint8_t owner_lock[40];
  /// The device this context opened ("uroce_lo"), for uroced's reports.
  char dev_name[24];
  /// The NetCounters of the context's QPs that are gone (contract/counters.h),
  /// or 0 before its first network QP. Stored once by the owner (release).
  std::atomic<uint64_t> counters_off;
};
static_assert(sizeof(pthread_mutex_t) <= 40);

/// True while the segment's owner lives (uroced has not declared it dead and
/// the kernel has not marked its lifetime lock owner-died). One or two loads.
inline bool seg_owner_alive(const SegHeader* h) {
  constexpr uint32_t kFutexOwnerDied = 0x40000000;  // linux/futex.h
  // glibc's pthread_mutex_t starts with the futex word (__data.__lock).
  const uint32_t word =
      std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(const_cast<uint8_t*>(h->owner_lock)))
          .load(std::memory_order_acquire);
  return h->alive.load(std::memory_order_acquire) && !(word & kFutexOwnerDied);  // pairs with uroced's store
}

/// One memory region or memory window, indexed by key_slot(key). Written by
/// the owner, under a seqlock; peers validate keys against it without the
/// owner's help. The one write a peer makes: invalidating a type 2 window
/// named by a SEND with Invalidate (mr_revoke_window).
struct alignas(kCacheLine) MrEntry {
  /// Seqlock: a writer CASes it from even to odd (mr_write_begin), rewrites,
  /// makes it even again (release); readers load (acquire), copy, re-check.
  std::atomic<uint32_t> seq;
  uint32_t key;  // lkey == rkey; 0 = free slot
  uint32_t pd_id;
  uint32_t access;  // access:: bits
  uint64_t iova;    // first address as work requests name it
  uint64_t length;
  uint64_t vaddr;  // where iova lives in the owner's address space
  // Shared pages (memory/mr_backing.h): the owner's memfd number (-1: none),
  // its inode, and the owner address of the memfd's offset 0.
  int32_t share_fd;
  uint32_t win_qpn;  // a type 2 window (access::kWindow2): the QP it was bound through
  uint64_t share_ino;
  uint64_t share_start;
};

/// A snapshot of an MrEntry taken under the seqlock.
struct MrView {
  uint32_t key, pd_id, access;
  uint64_t iova, length, vaddr;
  int32_t share_fd = -1;
  uint64_t share_ino = 0, share_start = 0;
  uint32_t win_qpn = 0;
};

/// Reads a consistent snapshot; false if the slot does not hold `key`.
/// `*seq_out` (optional) gets the seqlock word the snapshot is valid for.
inline bool mr_read(const MrEntry* e, uint32_t key, MrView* out, uint32_t* seq_out = nullptr) {
  for (int tries = 0; tries < 1000; ++tries) {
    uint32_t s1 = e->seq.load(std::memory_order_acquire);  // pairs with mr_write's release
    if (s1 & 1) continue;
    out->key = e->key;
    out->pd_id = e->pd_id;
    out->access = e->access;
    out->iova = e->iova;
    out->length = e->length;
    out->vaddr = e->vaddr;
    out->share_fd = e->share_fd;
    out->share_ino = e->share_ino;
    out->share_start = e->share_start;
    out->win_qpn = e->win_qpn;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e->seq.load(std::memory_order_relaxed) == s1) {
      if (seq_out) *seq_out = s1;
      return out->key == key && key != 0;
    }
  }
  return false;
}

/// A one-entry cache of an MrEntry snapshot for the data path: still valid
/// while the entry's seqlock word is unchanged (every rewrite moves it), so
/// a hit costs two loads instead of a whole seqlock read.
struct MrCache {
  const MrEntry* e = nullptr;
  uint32_t seq = 1;  // odd: matches no stable entry
  MrView v{};
};

/// mr_read through `c`: the snapshot for `key`, or nullptr if the slot does not hold it.
inline const MrView* mr_read_cached(const MrEntry* e, uint32_t key, MrCache* c) {
  if (c->e == e && c->v.key == key && e->seq.load(std::memory_order_acquire) == c->seq) return &c->v;
  uint32_t s;
  if (!mr_read(e, key, &c->v, &s)) {
    c->e = nullptr;
    return nullptr;
  }
  c->e = e;
  c->seq = s;
  return &c->v;
}

/// How long a writer waits for another to finish before taking the slot
/// anyway: a write is a handful of stores, so a holder for that long died
/// in the middle of one.
constexpr uint64_t kMrWriteWaitNs = 10000000;

/// Seqlock writer side: takes the slot (even -> odd) and returns the odd word.
inline uint32_t mr_write_begin(MrEntry* e) {
  uint64_t deadline = 0;
  uint32_t s = e->seq.load(std::memory_order_relaxed);
  for (;;) {
    if (!(s & 1) && e->seq.compare_exchange_weak(s, s + 1, std::memory_order_acquire)) break;
    if (s & 1) {
      const uint64_t now = now_ns();
      if (!deadline) deadline = now + kMrWriteWaitNs;
      if (now > deadline) {
        e->seq.store(s + 2, std::memory_order_relaxed);  // overtake a dead writer
        s += 2;
        continue;
      }
      cpu_relax();
      s = e->seq.load(std::memory_order_relaxed);
    }
  }
  std::atomic_thread_fence(std::memory_order_release);
  return s + 1;
}
inline void mr_write_end(MrEntry* e, uint32_t odd) {
  e->seq.store(odd + 1, std::memory_order_release);  // pairs with mr_read's acquire
}

/// Rewrites a slot (the owner's registrations, binds and invalidations).
inline void mr_write(MrEntry* e, const MrView& v) {
  const uint32_t odd = mr_write_begin(e);
  e->key = v.key;
  e->pd_id = v.pd_id;
  e->access = v.access;
  e->iova = v.iova;
  e->length = v.length;
  e->vaddr = v.vaddr;
  e->share_fd = v.share_fd;
  e->win_qpn = v.win_qpn;
  e->share_ino = v.share_ino;
  e->share_start = v.share_start;
  mr_write_end(e, odd);
}

/// A SEND with Invalidate arriving at QP `qpn` of PD `pd_id` (IBA 10.6.7,
/// memory windows): the type 2 window bound through that QP with `key` stops
/// answering to it. Runs wherever the receiving side runs (a peer on the
/// intra-host link, the owner on the network link). False if `key` names no
/// such window (nothing changes).
inline bool mr_revoke_window(MrEntry* e, uint32_t key, uint32_t pd_id, uint32_t qpn) {
  const uint32_t odd = mr_write_begin(e);
  const bool ok =
      key != 0 && e->key == key && (e->access & access::kWindow2) && e->pd_id == pd_id && e->win_qpn == qpn;
  if (ok) e->key = 0;
  mr_write_end(e, odd);
  return ok;
}

/// True if [addr, addr+len) lies inside the region.
inline bool mr_contains(const MrView& m, uint64_t addr, uint64_t len) {
  return addr >= m.iova && len <= m.length && addr - m.iova <= m.length - len;
}

/// Receive queue (of a QP) or shared receive queue: one producer (the owner's
/// post_recv, under its local lock), many consumers (senders in any process).
struct alignas(kCacheLine) RqRing {
  /// Producer publishes a filled slot by storing tail+1 (release); consumers
  /// load it (acquire).
  alignas(kCacheLine) std::atomic<uint64_t> tail;
  /// Consumers copy slot `head` then claim it with CAS(head, head+1); the
  /// producer loads it (acquire) to see freed slots.
  alignas(kCacheLine) std::atomic<uint64_t> head;
  alignas(kCacheLine) uint32_t max_wr;  // logical depth (ENOMEM beyond)
  uint32_t mask;                        // slots - 1 (power of two)
  uint32_t max_sge;
  uint32_t stride;  // bytes per slot
  uint32_t is_srq;
  uint32_t srq_num;
  /// SRQ limit (0 = disarmed). A consumer that leaves fewer than this many
  /// WQEs exchanges it to 0 and raises IBV_EVENT_SRQ_LIMIT_REACHED.
  std::atomic<uint32_t> srq_limit;
  int32_t owner_pid;
  uint64_t owner_ctx_handle;  // async-event socket id of the owner
  uint64_t user_handle;       // owner's ibv_srq*, echoed in events
  uint64_t slots_off;         // offset of slot 0 in the segment
  // XRC SRQs only (IBA 11.5 / 9.8): the SRQ names its own domain, PD and CQ.
  uint32_t xrcd_id;  // 0 = not an XRC SRQ
  uint32_t pd_id;
  uint64_t cq_off;  // CqRing for completions of this SRQ
  /// kRqMagic while an XRC SRQ exists (peers resolve it by number).
  std::atomic<uint32_t> magic;
};
constexpr uint32_t kRqMagic = 0x58535251;  // "XSRQ"

/// One posted receive in an RqRing slot (followed by max_sge Sges).
struct RqWqe {
  uint64_t wr_id;
  uint32_t num_sge;
  uint32_t pad;
  Sge sge[];
};

/// One completion; same information as struct ibv_wc plus bookkeeping.
struct alignas(kCacheLine) Cqe {
  /// Producer stores pos+1 (release) after filling; consumer loads (acquire).
  /// Accessed only through std::atomic_ref (Cqe is copied by value elsewhere).
  uint64_t seq;
  uint64_t wr_id;
  uint8_t status;  // WcStatus
  uint8_t opcode;  // WcOpcode (fits: 0..7, 128, 129)
  uint8_t sl;
  uint8_t dlid_path_bits;
  uint32_t byte_len;
  uint32_t imm;  // network order, as ibv_wc.imm_data
  uint32_t qp_num;
  uint32_t src_qp;
  uint32_t wc_flags;
  uint16_t pkey_index;
  uint16_t slid;
  /// Send completions only (written by the owner): which local QP and how many
  /// send-queue slots this completion retires.
  uint16_t local_qp;
  uint16_t sq_retire;
  uint64_t timestamp_ns;
};
static_assert(sizeof(Cqe) == 64);

/// Completion queue: many producers (the owner's send side and senders in any
/// process), one consumer (the owner's poll_cq, under its local lock).
struct alignas(kCacheLine) CqRing {
  /// Producers claim a position with CAS(tail, tail+1) after checking space
  /// against head (acquire).
  alignas(kCacheLine) std::atomic<uint64_t> tail;
  /// Consumer stores head+1 (release) after reading a slot; pairs with the
  /// producers' space check.
  alignas(kCacheLine) std::atomic<uint64_t> head;
  /// Notification arm: 0, kArmNext or kArmSolicited. The consumer stores it
  /// (seq_cst) in req_notify_cq; a producer exchanges it to 0 (seq_cst)
  /// after publishing and, if it was armed, wakes the completion channel.
  alignas(kCacheLine) std::atomic<uint32_t> armed;
  std::atomic<uint32_t> overflow;  // set by a producer that found it full
  uint32_t capacity;               // power of two
  uint32_t mask;
  int32_t owner_pid;
  uint32_t channel_id;   // 0 = no completion channel
  uint64_t user_handle;  // owner's ibv_cq*, echoed in the wake-up
  uint64_t slots_off;
  uint32_t owner_async_id;  // the owner context's async-event endpoint (IBV_EVENT_CQ_ERR)
  uint32_t want_ts;         // 1: producers stamp completions (ibv_cq_ex completion timestamps)
};
constexpr uint32_t kArmNext = 1;
constexpr uint32_t kArmSolicited = 2;

/// Small SENDs skip the cross-process copy: the sender stores the payload in a
/// bounce record that sits beside the completion's slot (same position), and
/// the receiver copies it into the receive buffer when it polls that
/// completion, before it can look at the buffer. Each CQ slot array is
/// followed by `capacity` records of this size: {u64 destination, payload}.
constexpr uint32_t kCqBounceBytes = 256;
constexpr uint32_t kCqBouncePayload = kCqBounceBytes - 8;
/// Internal wc_flags bit: this completion's payload waits in its bounce record.
constexpr uint32_t kCqeBounced = 1u << 31;
/// Bytes of one slot array (completions + bounce records) for `cap` entries.
constexpr size_t cq_slot_array_bytes(uint32_t cap) { return size_t(cap) * (sizeof(Cqe) + kCqBounceBytes); }

/// The part of a QP that peers need to act as its "NIC" on the intra-host link.
struct alignas(kCacheLine) QpShm {
  uint32_t magic;  // kQpMagic while the QP exists
  uint32_t qpn;
  /// QpState. The owner's Qp stores the transitions ibv_modify_qp asks for;
  /// a move to ERR on an error goes through qp_enter_error, whoever finds
  /// the error. Peers load it (acquire) before each operation.
  std::atomic<uint32_t> state;
  uint32_t qp_type;
  uint32_t pd_id;
  uint32_t access_flags;  // qp_access_flags: remote operations permitted
  uint32_t qkey;
  uint32_t min_rnr_timer;  // responder's RNR NAK timer (IB encoding)
  uint64_t rq_off;         // RqRing of this QP, or of its SRQ
  uint64_t recv_cq_off;    // CqRing
  uint32_t has_srq;
  uint32_t dest_qpn;
  int32_t owner_pid;
  uint32_t owner_ctx_id;
  uint64_t user_handle;  // owner's ibv_qp*, echoed in async events
  uint32_t xrcd_id;      // XRC target QPs: the domain whose SRQs it may deliver to
  /// The link its packets take (QpLink), for `uroce res qp`; set by the
  /// owner at RTR.
  std::atomic<uint32_t> link;
  /// The QP's NetCounters (contract/counters.h) while it has a network link,
  /// else 0. The owner stores it (release) after zeroing the block.
  std::atomic<uint64_t> counters_off;
  /// Its EagerRing (small SENDs in one line), or 0: set at creation, before
  /// magic, and fixed for the QP's life.
  uint64_t eager_off;
};

/// QpShm::link: how the QP's messages travel.
enum class QpLink : uint32_t {
  kShm = 0,  // shared memory (the intra-host link)
  kUdp = 1,  // RoCE v2 through the kernel's UDP sockets
  kXdp = 2,  // RoCE v2 frames through an AF_XDP socket
};

/// States in which a QP accepts incoming requests (IBA 10.3.1: RTR and
/// later, not ERR), which are also the states in which it works and so
/// can meet an error.
inline bool state_can_receive(QpState s) {
  return s == QpState::kRtr || s == QpState::kRts || s == QpState::kSqd || s == QpState::kSqe;
}

/// The one move of a QP's state to ERR on an error (IBA 10.3.1, 10.8.3),
/// made by whoever finds it: the owner (a failed WQE, a responder error
/// found at its own poll or on its network link), a peer acting as its NIC
/// on the intra-host link (memory/target.h), uroced when the owner dies. Only
/// a working QP (state_can_receive) moves; true if this call moved it, so
/// that exactly one caller does what follows once (the async event).
/// ibv_modify_qp's move to ERR is a transition of the owner's (core::Qp).
inline bool qp_enter_error(QpShm& q) {
  uint32_t s = q.state.load(std::memory_order_acquire);
  while (state_can_receive(QpState(s)))
    if (q.state.compare_exchange_weak(s, uint32_t(QpState::kErr), std::memory_order_acq_rel)) return true;
  return false;
}

/// A small SEND on the intra-host link in one cache line (docs/intra-host-link.md,
/// "A small SEND in one cache line"): the sender claims the receive (the RQ's
/// head, without reading the receive WQE) and writes one record into the
/// receiver's EagerRing; the receiver's poll_cq reads the record, its own
/// receive WQE and buffers, and builds the completion. RC and UC QPs with a
/// receive queue of their own.
constexpr uint32_t kEagerPayload = 48;
constexpr uint32_t kEagerMaxRecords = 128;
struct alignas(kCacheLine) EagerRec {
  /// The ring position + 1 (low 32 bits): the producer stores it (release)
  /// after the rest; the consumer loads it (acquire).
  uint32_t seq;
  uint32_t rq_pos;  // the receive claimed (low 32 bits of the RQ position)
  uint32_t imm;     // network order
  uint8_t len;      // payload bytes (<= kEagerPayload)
  uint8_t op;       // EagerOp
  uint8_t flags;    // kEagerSolicited
  uint8_t pad;
  uint8_t data[kEagerPayload];
};
static_assert(sizeof(EagerRec) == 64);
enum EagerOp : uint8_t { kEagerSend = 1, kEagerSendImm = 2, kEagerSkip = 3 };
constexpr uint8_t kEagerSolicited = 1;
struct alignas(kCacheLine) EagerRing {
  /// Producers claim a record with CAS(prod, prod+1) after checking room
  /// against cons (acquire); the sender's line.
  alignas(kCacheLine) std::atomic<uint64_t> prod;
  /// The consumer (the owner's poll_cq) stores how many records it has
  /// read (release), pairs with the room check.
  alignas(kCacheLine) std::atomic<uint64_t> cons;
  /// 1 + the largest payload every receive posted since the last reset can
  /// take, its keys valid when posted (at most kEagerPayload + 1); 0 = off.
  /// The owner stores it at post_recv (when it drops) and at RESET; a
  /// sender reads it on every SEND (a line written rarely).
  alignas(kCacheLine) std::atomic<uint32_t> limit;
  uint32_t size;  // records, a power of two
  // EagerRec records[size] follow, at sizeof(EagerRing).
};
static_assert(sizeof(EagerRing) == 3 * kCacheLine);
inline EagerRec* eager_rec(EagerRing* r, uint32_t mask, uint64_t pos) {
  return reinterpret_cast<EagerRec*>(reinterpret_cast<uint8_t*>(r) + sizeof(EagerRing)) + (pos & mask);
}

/// Per-device shared memory, created by uroced and mapped by every client:
/// locks that make RDMA atomics atomic against each other device-wide
/// (link/shm_link.h).
struct alignas(kCacheLine) HostShm {
  uint64_t magic;
  /// Set (never cleared) by a process that cannot issue the membarrier a
  /// consumer needs when it arms a CQ: from then on every completion
  /// producer on the host fences instead (see cq_push, cq_arm_barrier).
  std::atomic<uint32_t> cq_producers_fence;
  link::AtomicStripe stripes[link::kAtomicStripes];
};

static_assert(std::is_standard_layout_v<SegHeader>);
static_assert(std::is_standard_layout_v<MrEntry> && sizeof(MrEntry) == 64);
static_assert(std::is_standard_layout_v<RqRing>);
static_assert(std::is_standard_layout_v<Cqe>);
static_assert(std::is_standard_layout_v<CqRing>);
static_assert(std::is_standard_layout_v<QpShm> && sizeof(QpShm) == 2 * kCacheLine);
static_assert(std::is_standard_layout_v<EagerRing> && std::is_standard_layout_v<EagerRec>);
static_assert(std::is_standard_layout_v<HostShm>);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(Sge) == 16);

}  // namespace uroce::core
