#include "memory/peer_map.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <new>

#include "common/log.h"
#include "contract/control_client.h"
#include "contract/qp_directory.h"
#include "memory/peer_pages.h"

namespace uroce::core {

PeerMap& PeerMap::get() {
  static PeerMap* m = [] {
    auto* n = new PeerMap();  // lives for the process
    // A lock held by another parent thread at fork() is never released in the child.
    pthread_atfork(nullptr, nullptr, [] { new (&PeerMap::get().mu_) std::shared_mutex(); });
    return n;
  }();
  return *m;
}

namespace {
/// The size of a peer's segment memfd, or 0 if it is not sealed against
/// shrinking (then a store into it could fault: the reader refuses it).
uint64_t sealed_size(int fd) {
  struct stat st;
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(fd, &st) != 0) return 0;
  return std::min<uint64_t>(uint64_t(st.st_size), kSegReserveBytes);
}
}  // namespace

Result<PeerSegment*> PeerMap::map_segment(uint32_t ctx_id, int32_t pid, int memfd) {
  auto it = segs_.find(ctx_id);
  if (it != segs_.end() && it->second->pid == pid) {
    if (memfd >= 0) close(memfd);
    return it->second.get();
  }
  if (memfd < 0) return Status(ENOENT);
  const uint64_t size = sealed_size(memfd);
  if (size < sizeof(SegHeader)) {
    UROCE_ERR("peer context segment of pid %d refused: not sealed against shrinking, or too small", int(pid));
    close(memfd);
    return Status(EINVAL);
  }
  void* p = mmap(nullptr, kSegReserveBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    close(memfd);
    return Status(e);
  }
  auto seg = std::make_unique<PeerSegment>();
  seg->ctx_id = ctx_id;
  seg->pid = pid;
  seg->base = static_cast<uint8_t*>(p);
  seg->bound.memfd = memfd;
  seg->bound.size.store(size, std::memory_order_relaxed);
  // What the header says is read once, checked, and kept here.
  const SegHeader* h = seg->header();
  const uint64_t mr_off = std::atomic_ref<const uint64_t>(h->mr_table_off).load(std::memory_order_relaxed);
  const uint32_t mr_cap = std::atomic_ref<const uint32_t>(h->mr_capacity).load(std::memory_order_relaxed);
  if (h->magic != kSegMagic || mr_off % alignof(MrEntry) || mr_cap > kMaxMrPerContext ||
      !seg->bound.covers(mr_off, uint64_t(mr_cap) * sizeof(MrEntry))) {
    UROCE_ERR("peer context segment of pid %d refused: bad magic or MR table", int(pid));
    munmap(p, kSegReserveBytes);
    close(memfd);
    return Status(EINVAL);
  }
  seg->mr_table = reinterpret_cast<MrEntry*>(seg->base + mr_off);
  seg->mr_capacity = mr_cap;
  // Segments of owners that are gone stay mapped (cached peers may still
  // look at them) but give back their descriptors.
  for (auto& [id, other] : segs_)
    if (!seg_owner_alive(other->header())) other->bound.release();
  PeerSegment* raw = seg.get();
  if (it != segs_.end()) {
    // The context id now names another process's segment: nothing cached
    // may keep pointing into the old mapping.
    const PeerSegment* old = it->second.get();
    std::erase_if(qps_, [old](const auto& kv) { return kv.second.seg == old; });
    std::erase_if(srqs_, [old](const auto& kv) { return kv.second.seg == old; });
    peer_pages_forget(old);
    munmap(it->second->base, kSegReserveBytes);
    it->second->bound.release();
  }
  segs_[ctx_id] = std::move(seg);
  return raw;
}

PeerSegment* PeerMap::mapped_owner(uint32_t qpn, bool is_srq, uint64_t* off) {
  const QpDirectory* d = qp_directory();
  if (!d) return nullptr;
  const QpDirHit h = qp_dir_get(d, qpn);
  if (!h.found || h.is_srq != is_srq) return nullptr;
  auto it = segs_.find(h.ctx_id);
  if (it == segs_.end() || it->second->pid != h.pid || !seg_owner_alive(it->second->header())) return nullptr;
  *off = h.off;
  return it->second.get();
}

Result<PeerQp> PeerMap::resolve(uint32_t qpn) {
  {
    std::shared_lock<std::shared_mutex> g(mu_);
    auto it = qps_.find(qpn);
    if (it != qps_.end() && it->second.valid()) return it->second;
  }
  {
    // The directory answers without a round trip when the owner's segment
    // is mapped here already.
    std::unique_lock<std::shared_mutex> g(mu_);
    uint64_t off = 0;
    if (PeerSegment* seg = mapped_owner(qpn, false, &off)) {
      auto pq = place_qp(seg, qpn, off);
      if (pq.is_ok()) return pq;
    }
  }
  auto cc = ControlClient::get();
  if (!cc.is_ok()) return Status(cc.err());
  auto r = cc.value()->resolve_qpn(qpn);
  if (!r.is_ok()) return Status(r.err());
  std::unique_lock<std::shared_mutex> g(mu_);
  auto seg = map_segment(r->ctx_id, r->pid, r->memfd);
  if (!seg.is_ok()) return Status(seg.err());
  return place_qp(seg.value(), qpn, r->qp_off);
}

Result<PeerQp> PeerMap::place_qp(PeerSegment* seg, uint32_t qpn, uint64_t qp_off) {
  PeerQp pq;
  pq.seg = seg;
  SegBound& b = pq.seg->bound;
  if (!b.covers(qp_off, sizeof(QpShm)) || qp_off % alignof(QpShm)) {
    b.set_corrupt("a QP outside the segment");
    return Status(EINVAL);
  }
  pq.qp = reinterpret_cast<QpShm*>(pq.seg->base + qp_off);
  pq.qpn = qpn;
  if (!pq.valid()) return Status(ENOENT);
  // Where its rings are is read once, checked, and kept (PeerQp).
  const uint64_t rq_off = std::atomic_ref<uint64_t>(pq.qp->rq_off).load(std::memory_order_relaxed);
  const uint64_t cq_off = std::atomic_ref<uint64_t>(pq.qp->recv_cq_off).load(std::memory_order_relaxed);
  if ((rq_off && (!b.covers(rq_off, sizeof(RqRing)) || rq_off % alignof(RqRing))) ||
      (cq_off && (!b.covers(cq_off, sizeof(CqRing)) || cq_off % alignof(CqRing)))) {
    b.set_corrupt("a QP's rings outside the segment");
    return Status(EINVAL);
  }
  if (rq_off) pq.rq = reinterpret_cast<RqRing*>(pq.seg->base + rq_off);
  if (cq_off) pq.rcq = reinterpret_cast<CqRing*>(pq.seg->base + cq_off);
  const uint64_t eager_off = std::atomic_ref<uint64_t>(pq.qp->eager_off).load(std::memory_order_relaxed);
  if (eager_off && pq.rq && pq.rcq) {
    auto* ring = b.covers(eager_off, sizeof(EagerRing)) && eager_off % alignof(EagerRing) == 0
                     ? reinterpret_cast<EagerRing*>(pq.seg->base + eager_off)
                     : nullptr;
    const uint32_t size = ring ? std::atomic_ref<uint32_t>(ring->size).load(std::memory_order_relaxed) : 0;
    if (!ring || size == 0 || (size & (size - 1)) || size > kEagerMaxRecords ||
        !b.covers(eager_off, sizeof(EagerRing) + uint64_t(size) * sizeof(EagerRec))) {
      b.set_corrupt("a QP's eager ring outside the segment");
      return Status(EINVAL);
    }
    pq.eager = ring;
    pq.eager_mask = size - 1;
  }
  qps_[qpn] = pq;
  return pq;
}

Result<PeerSrq> PeerMap::resolve_srq(uint32_t srqn) {
  {
    std::shared_lock<std::shared_mutex> g(mu_);
    auto it = srqs_.find(srqn);
    if (it != srqs_.end() && it->second.valid()) return it->second;
  }
  {
    std::unique_lock<std::shared_mutex> g(mu_);
    uint64_t off = 0;
    if (PeerSegment* seg = mapped_owner(srqn, true, &off)) {
      auto ps = place_srq(seg, srqn, off);
      if (ps.is_ok()) return ps;
    }
  }
  auto cc = ControlClient::get();
  if (!cc.is_ok()) return Status(cc.err());
  auto r = cc.value()->resolve_qpn(srqn, true);
  if (!r.is_ok()) return Status(r.err());
  std::unique_lock<std::shared_mutex> g(mu_);
  auto seg = map_segment(r->ctx_id, r->pid, r->memfd);
  if (!seg.is_ok()) return Status(seg.err());
  return place_srq(seg.value(), srqn, r->qp_off);
}

Result<PeerSrq> PeerMap::place_srq(PeerSegment* seg, uint32_t srqn, uint64_t off) {
  PeerSrq ps;
  ps.seg = seg;
  if (!ps.seg->bound.covers(off, sizeof(RqRing)) || off % alignof(RqRing)) {
    ps.seg->bound.set_corrupt("an SRQ outside the segment");
    return Status(EINVAL);
  }
  ps.rq = reinterpret_cast<RqRing*>(ps.seg->base + off);
  ps.srqn = srqn;
  if (!ps.valid()) return Status(ENOENT);
  srqs_[srqn] = ps;
  return ps;
}

}  // namespace uroce::core
