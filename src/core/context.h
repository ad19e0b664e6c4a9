// A device context (one per ibv_open_device): its shared segment registered
// with uroced, its async-event endpoint, and its memory-region table.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "contract/control_client.h"
#include "contract/counters.h"
#include "contract/device_info.h"
#include "contract/limits.h"
#include "contract/shm_layout.h"
#include "contract/types.h"
#include "memory/segment.h"
#include "net/wr.h"

namespace uroce::core {

/// A registered region as the owner's local lookups see it.
struct LocalMr {
  MrView view;
  uint32_t slot;
};

class Context {
 public:
  static Result<std::unique_ptr<Context>> open(const DeviceInfo& dev);
  ~Context();

  const DeviceInfo& dev() const { return dev_; }
  /// A zeroed NetCounters block in this context's segment (contract/counters.h).
  Result<NetCounters*> open_counters();
  /// Adds a QP's block to the context's retired counters and frees it.
  void retire_counters(NetCounters* k);
  Segment& seg() { return *seg_; }
  uint32_t ctx_id() const { return ctx_id_; }
  int async_fd() const { return async_fd_; }
  uint32_t async_id() const { return async_id_; }
  HostShm* host() const { return ctl_->host_shm(); }
  ControlClient* ctl() const { return ctl_; }
  /// Set when uroced died (IBV_EVENT_DEVICE_FATAL was raised).
  bool fatal() const { return fatal_.load(std::memory_order_relaxed); }
  void set_fatal() { fatal_.store(true); }
  /// This process's own segment was found to hold nonsense (a peer
  /// scribbled over it: memory/seg_bound.h): the device goes fatal, as a NIC
  /// whose queues were corrupted would (IBV_EVENT_DEVICE_FATAL, once).
  void own_segment_corrupt();

  uint32_t alloc_pd_id() { return next_pd_id_.fetch_add(1); }

  /// A QP's place in the segment and its QPN, taken from a batch uroced
  /// handed out ahead: one round trip per kQpSlotBatch QPs, not one per QP
  /// (the QPN is registered to the place, so peers resolve it at once).
  /// Places come in chunks of kQpSlotBatch; a chunk whose places all came
  /// back is batched again, so a process that keeps making and destroying
  /// QPs does not grow its segment.
  struct QpSlot {
    uint32_t qpn;
    uint64_t off;    // a zeroed QpShm
    uint64_t chunk;  // the chunk it belongs to (for release_qp_slot)
  };
  static constexpr uint32_t kQpSlotBatch = 8;
  Result<QpSlot> take_qp_slot();
  /// A slot taken but not used (its QpShm still untouched): back to the pool, QPN and all.
  void put_back_qp_slot(const QpSlot& s);
  /// The QP in a slot of `chunk` is gone (its QPN freed with uroced).
  void release_qp_slot(uint64_t chunk);
  /// Bytes of device memory this context may still allocate (core/device_memory.h).
  std::atomic<uint64_t>* dm_budget() { return &dm_left_; }

  /// Registers [vaddr, vaddr+len) addressed as iova; returns the key (lkey == rkey).
  Result<uint32_t> reg_mr(uint32_t pd_id, uint64_t vaddr, uint64_t len, uint64_t iova, uint32_t access);
  /// Rewrites a registration in place (ibv_rereg_mr); the key stays.
  /// EINVAL while memory windows are bound to it.
  Status rereg_mr(uint32_t key, uint32_t pd_id, uint64_t vaddr, uint64_t len, uint64_t iova, uint32_t access);
  /// EINVAL while memory windows are bound to it (as rxe answers).
  Status dereg_mr(uint32_t key);
  /// ibv_advise_mr for one SGE: [addr, addr+len) of on-demand region `key`
  /// in `pd_id` gets its pages faulted in now (for writing if `write`), or
  /// is only checked if `!populate` (PREFETCH_NO_FAULT). Errors as the man
  /// page lists them: EFAULT (unknown key, outside the region, unmapped),
  /// EPERM (another PD; write without local write), EINVAL (not on-demand).
  Status prefetch_mr(uint32_t pd_id, uint32_t key, uint64_t addr, uint64_t len, bool write, bool populate);
  /// Looks up a local key for an access by this context's QP in `pd_id`.
  const MrEntry* mr_entry(uint32_t key) const { return &seg_->mr_table()[key_slot(key)]; }

  // --- memory windows (core/context_window.cc; IBA 10.6.7). A window is an
  // entry of the MR table whose key peers present as an R_Key; it covers
  // part of a region and grants remote access of its own.
  /// ibv_alloc_mw: a slot and key for a window of `type` (1 or 2) in
  /// `pd_id`, reaching nothing until bound.
  Result<uint32_t> alloc_window(uint32_t pd_id, uint32_t type);
  /// ibv_dealloc_mw: unbinds (a bound window stops answering) and frees the slot.
  void free_window(uint32_t key);
  /// Binds by a QP of `qp_pd` numbered `qpn`; kSuccess or kMwBindErr (bad
  /// window or key, PD mismatch, region without kMwBind, range
  /// outside it, remote write or atomic over a region without local write,
  /// a type 2 window already bound).
  WcStatus bind_window(const WindowBind& b, uint32_t qp_pd, uint32_t qpn);
  /// IBV_WR_LOCAL_INV by a QP of `qp_pd`: the type 2 window bound with
  /// `key` stops answering; kLocQpOpErr if there is none (as rxe).
  WcStatus local_invalidate(uint32_t key, uint32_t qp_pd);
  bool lookup_mr(uint32_t key, MrView* out) const {
    return mr_read(&seg_->mr_table()[key_slot(key)], key, out);
  }

 private:
  Context() = default;
  void share_pages(MrView* v);

  DeviceInfo dev_{};
  std::unique_ptr<Segment> seg_;
  ControlClient* ctl_ = nullptr;
  uint32_t ctx_id_ = 0;
  int async_fd_ = -1;
  uint32_t async_id_ = 0;
  std::atomic<bool> fatal_{false};
  bool lock_held_ = false;
  std::atomic<uint32_t> next_pd_id_{1};
  std::atomic<uint64_t> dm_left_{kLimits.max_dm_size};
  /// A chunk of kQpSlotBatch QpShms: one whose places all came back, zeroed
  /// again, or a new one (qp_slots_mu_ held, or before sharing).
  Result<uint64_t> next_chunk();
  /// The chunk at `base` got QPNs `qpns` for its first `got` places.
  void add_qp_slots(uint64_t base, const uint32_t* qpns, uint32_t got);
  std::mutex qp_slots_mu_;
  std::vector<QpSlot> qp_slots_;         // the next one at the back
  std::map<uint64_t, uint32_t> chunks_;  // base -> places not in use (back, or never numbered)
  std::vector<uint64_t> free_chunks_;    // bases whose places are all back
  /// A slot (and its key) for a region or window; 0 when the table is full.
  Result<uint32_t> take_slot_key();
  void give_back_slot(uint32_t slot);
  /// True while a window is bound over region `mr_key`.
  bool window_bound_over(uint32_t mr_key);

  std::mutex mr_mu_;
  std::mutex retired_mu_;  // the retired NetCounters block
  std::vector<uint32_t> free_slots_;
  uint32_t next_slot_ = 1;
  /// The owner's view of its windows, by slot (under mr_mu_).
  struct Window {
    uint32_t type, pd_id;
    uint32_t mr_key = 0;  // the region it was last bound over
  };
  std::unordered_map<uint32_t, Window> windows_;
};

}  // namespace uroce::core
