#include "core/context.h"

#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "core/cq.h"
#include "core/service.h"
#include "memory/mr_backing.h"
#include "memory/notify.h"

namespace uroce::core {

Result<std::unique_ptr<Context>> Context::open(const DeviceInfo& dev) {
  auto cc = ControlClient::get();
  if (!cc.is_ok()) return Status(cc.err());
  std::unique_ptr<Context> c(new Context());
  c->dev_ = dev;
  c->ctl_ = cc.value();
  cq_barrier_setup(c->ctl_->host_shm());
  auto seg = Segment::create();
  if (!seg.is_ok()) return Status(seg.err());
  c->seg_ = std::move(seg.value());
  // "uroce_" and an interface name (at most 15) fit; uroced reads the field
  // as at most its size, terminated or not (registry.cc, seg_dev_name).
  char* dn = c->seg_->header()->dev_name;
  memcpy(dn, dev.name, strnlen(dev.name, sizeof(SegHeader::dev_name)));
  // The lifetime lock (SegHeader::owner_lock): robust and process-shared, so
  // the kernel marks it owner-died the moment this process dies.
  auto* lock = reinterpret_cast<pthread_mutex_t*>(c->seg_->header()->owner_lock);
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(lock, &ma);
  pthread_mutexattr_destroy(&ma);
  if (!Service::get().hold_lifetime_lock(lock)) return Status(ETIMEDOUT);
  c->lock_held_ = true;
  // The first batch of QP slots comes with the registration: a process's
  // first QP costs no round trip either.
  auto chunk = c->next_chunk();
  if (!chunk.is_ok()) return Status(chunk.err());
  uint32_t qpns[kQpSlotBatch];
  ControlClient::QpnBatch batch{chunk.value(), Segment::block_size(sizeof(QpShm)), kQpSlotBatch, qpns};
  auto id = c->ctl_->register_ctx(c->seg_->memfd(), &batch);
  if (!id.is_ok()) return Status(id.err());
  c->ctx_id_ = id.value();
  c->seg_->set_ctx_id(c->ctx_id_);
  c->add_qp_slots(chunk.value(), qpns, batch.got);
  // Peers copy into this process with process_vm_writev, which Yama's
  // ptrace_scope=1 would refuse between non-descendants; allow it (same-uid
  // checks still apply). Without Yama this fails harmlessly with EINVAL.
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  c->async_fd_ = notify_open(&c->async_id_);
  if (c->async_fd_ < 0) return Status(errno ? errno : EMFILE);
  return c;
}

Result<NetCounters*> Context::open_counters() {
  auto b = seg_->alloc(sizeof(NetCounters));
  if (!b.is_ok()) return Status(b.err());
  auto* k = reinterpret_cast<NetCounters*>(seg_->base() + b.value());
  k->magic = NetCounters::kMagic;
  return k;
}

void Context::retire_counters(NetCounters* k) {
  {
    std::lock_guard<std::mutex> g(retired_mu_);
    SegHeader* h = seg_->header();
    uint64_t off = h->counters_off.load(std::memory_order_relaxed);
    if (!off) {
      auto b = open_counters();
      if (b.is_ok()) {
        off = uint64_t(reinterpret_cast<uint8_t*>(b.value()) - seg_->base());
        h->counters_off.store(off, std::memory_order_release);  // pairs with uroced's acquire
      }
    }
    if (off) add_counters(reinterpret_cast<NetCounters*>(seg_->base() + off), *k);
  }
  seg_->free(uint64_t(reinterpret_cast<uint8_t*>(k) - seg_->base()), sizeof(NetCounters));
}

void Context::own_segment_corrupt() {
  if (fatal_.exchange(true)) return;
  NotifyMsg m{kNotifyAsync, uint32_t(AsyncEvent::kDeviceFatal), 0};
  notify_post(getpid(), async_id_, m);
}

Result<uint64_t> Context::next_chunk() {
  const uint64_t bytes = kQpSlotBatch * Segment::block_size(sizeof(QpShm));
  if (!free_chunks_.empty()) {
    const uint64_t base = free_chunks_.back();
    free_chunks_.pop_back();
    // A peer still holding one of these places from an old QP finds no
    // magic there, then another QPN (PeerQp::valid).
    memset(seg_->base() + base, 0, bytes);
    chunks_[base] = kQpSlotBatch;
    return base;
  }
  auto block = seg_->alloc(bytes);
  if (!block.is_ok()) return Status(block.err());
  chunks_[block.value()] = kQpSlotBatch;
  return block.value();
}

void Context::add_qp_slots(uint64_t base, const uint32_t* qpns, uint32_t got) {
  const uint64_t stride = Segment::block_size(sizeof(QpShm));
  for (uint32_t i = got; i-- > 0;) qp_slots_.push_back(QpSlot{qpns[i], base + i * stride, base});
  uint32_t& idle = chunks_[base];
  idle -= got;
  if (idle == kQpSlotBatch) free_chunks_.push_back(base);  // none numbered: usable again at once
}

Result<Context::QpSlot> Context::take_qp_slot() {
  std::lock_guard<std::mutex> g(qp_slots_mu_);
  if (qp_slots_.empty()) {
    auto chunk = next_chunk();
    if (!chunk.is_ok()) return Status(chunk.err());
    uint32_t qpns[kQpSlotBatch];
    auto got =
        ctl_->alloc_qpns(ctx_id_, chunk.value(), Segment::block_size(sizeof(QpShm)), kQpSlotBatch, qpns);
    add_qp_slots(chunk.value(), qpns, got.is_ok() ? got.value() : 0);
    if (!got.is_ok()) return Status(got.err());
  }
  const QpSlot s = qp_slots_.back();
  qp_slots_.pop_back();
  return s;
}

void Context::put_back_qp_slot(const QpSlot& s) {
  std::lock_guard<std::mutex> g(qp_slots_mu_);
  qp_slots_.push_back(s);
}

void Context::release_qp_slot(uint64_t chunk) {
  std::lock_guard<std::mutex> g(qp_slots_mu_);
  auto it = chunks_.find(chunk);
  if (it != chunks_.end() && ++it->second == kQpSlotBatch) free_chunks_.push_back(chunk);
}

Context::~Context() {
  // Regions the program never deregistered stop sharing their pages.
  for (uint32_t slot = 1; seg_ && slot < next_slot_; ++slot) {
    const MrEntry& e = seg_->mr_table()[slot];
    MrView v;
    // (A window shares its region's pages without holding them.)
    if (e.key && mr_read(&e, e.key, &v) && !(v.access & access::kWindow))
      mr_share_release(MrShare{v.share_fd, v.share_ino, v.share_start});
  }
  if (ctx_id_) ctl_->unregister_ctx(ctx_id_);
  // Unlock before the segment goes: the lock sits on the service thread's
  // robust list, which must not point into unmapped memory.
  if (lock_held_)
    Service::get().release_lifetime_lock(reinterpret_cast<pthread_mutex_t*>(seg_->header()->owner_lock));
  if (async_fd_ >= 0) close(async_fd_);
}

/// Regions peers write into or read from get shared pages (memory/mr_backing.h).
/// On-demand regions never do: every access goes through the process's
/// mapping as it is then (process_vm_* or the owner's own copy), which is
/// what ODP promises (pages faulted in on use, new mappings followed).
void Context::share_pages(MrView* v) {
  constexpr uint32_t kPeerVisible =
      access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;
  if (!(v->access & kPeerVisible) || (v->access & access::kOnDemand)) return;
  MrShare s = mr_share_acquire(v->vaddr, v->length);
  v->share_fd = s.fd;
  v->share_ino = s.ino;
  v->share_start = s.start;
}

Result<uint32_t> Context::take_slot_key() {
  uint32_t slot;
  {
    std::lock_guard<std::mutex> g(mr_mu_);
    if (!free_slots_.empty()) {
      slot = free_slots_.front();
      free_slots_.erase(free_slots_.begin());
    } else if (next_slot_ < kMaxMrPerContext) {
      slot = next_slot_++;
    } else {
      return Status(ENOMEM);
    }
  }
  auto key = ctl_->alloc_key(ctx_id_, slot);
  if (!key.is_ok()) give_back_slot(slot);
  return key;
}

void Context::give_back_slot(uint32_t slot) {
  std::lock_guard<std::mutex> g(mr_mu_);
  free_slots_.push_back(slot);
}

Result<uint32_t> Context::reg_mr(uint32_t pd_id, uint64_t vaddr, uint64_t len, uint64_t iova,
                                 uint32_t access) {
  auto key = take_slot_key();
  if (!key.is_ok()) return Status(key.err());
  const uint32_t slot = key_slot(key.value());
  MrView v{key.value(), pd_id, access, iova, len, vaddr};
  share_pages(&v);
  mr_write(&seg_->mr_table()[slot], v);
  return key.value();
}

Status Context::rereg_mr(uint32_t key, uint32_t pd_id, uint64_t vaddr, uint64_t len, uint64_t iova,
                         uint32_t access) {
  MrView old;
  if (!lookup_mr(key, &old) || (old.access & access::kWindow)) return Status(EINVAL);
  if (window_bound_over(key)) return Status(EINVAL);  // windows would keep the old pages
  MrView v{key, pd_id, access, iova, len, vaddr};
  share_pages(&v);  // before the release below: the same pages keep their backing
  mr_write(&seg_->mr_table()[key_slot(key)], v);
  mr_share_release(MrShare{old.share_fd, old.share_ino, old.share_start});
  return Status::ok();
}

Status Context::prefetch_mr(uint32_t pd_id, uint32_t key, uint64_t addr, uint64_t len, bool write,
                            bool populate) {
  MrView v;
  if (!lookup_mr(key, &v) || !mr_contains(v, addr, len)) return Status(EFAULT);
  if (v.pd_id != pd_id) return Status(EPERM);
  if (!(v.access & access::kOnDemand)) return Status(EINVAL);
  if (write && !(v.access & access::kLocalWrite)) return Status(EPERM);
  if (!populate || len == 0) return Status::ok();
  const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  const uint64_t va = v.vaddr + (addr - v.iova);
  const uint64_t start = va & ~(page - 1), end = (va + len + page - 1) & ~(page - 1);
  if (madvise(reinterpret_cast<void*>(start), end - start,
              write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) != 0) {
    // ENOMEM: not mapped; EFAULT: not accessible so. EINVAL: a kernel
    // before 5.14 without the advice: prefetching is best effort.
    if (errno == ENOMEM || errno == EFAULT) return Status(EFAULT);
  }
  return Status::ok();
}

Status Context::dereg_mr(uint32_t key) {
  uint32_t slot = key_slot(key);
  if (window_bound_over(key)) return Status(EINVAL);
  MrView old;
  bool had = lookup_mr(key, &old);
  MrView v{};
  mr_write(&seg_->mr_table()[slot], v);
  // Peers see the slot empty before the pages stop being shared.
  if (had) mr_share_release(MrShare{old.share_fd, old.share_ino, old.share_start});
  give_back_slot(slot);
  return Status::ok();
}

}  // namespace uroce::core
