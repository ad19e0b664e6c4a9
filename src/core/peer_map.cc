#include "core/peer_map.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <mutex>
#include <new>

#include "core/control_client.h"
#include "core/peer_pages.h"

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

Result<PeerSegment*> PeerMap::map_segment(uint32_t ctx_id, int32_t pid, int memfd) {
  auto it = segs_.find(ctx_id);
  if (it != segs_.end() && it->second->pid == pid) {
    if (memfd >= 0) close(memfd);
    return it->second.get();
  }
  if (memfd < 0) return Status(ENOENT);
  void* p = mmap(nullptr, kSegReserveBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd, 0);
  close(memfd);
  if (p == MAP_FAILED) return Status(errno);
  auto seg = std::make_unique<PeerSegment>();
  seg->ctx_id = ctx_id;
  seg->pid = pid;
  seg->base = static_cast<uint8_t*>(p);
  if (seg->header()->magic != kSegMagic) {
    munmap(p, kSegReserveBytes);
    return Status(EINVAL);
  }
  PeerSegment* raw = seg.get();
  if (it != segs_.end()) {
    // The context id now names another process's segment: nothing cached
    // may keep pointing into the old mapping.
    const PeerSegment* old = it->second.get();
    std::erase_if(qps_, [old](const auto& kv) { return kv.second.seg == old; });
    std::erase_if(srqs_, [old](const auto& kv) { return kv.second.seg == old; });
    peer_pages_forget(old);
    munmap(it->second->base, kSegReserveBytes);
  }
  segs_[ctx_id] = std::move(seg);
  return raw;
}

Result<PeerQp> PeerMap::resolve(uint32_t qpn) {
  {
    std::shared_lock<std::shared_mutex> g(mu_);
    auto it = qps_.find(qpn);
    if (it != qps_.end() && it->second.valid()) return it->second;
  }
  auto cc = ControlClient::get();
  if (!cc.is_ok()) return Status(cc.err());
  auto r = cc.value()->resolve_qpn(qpn);
  if (!r.is_ok()) return Status(r.err());
  std::unique_lock<std::shared_mutex> g(mu_);
  auto seg = map_segment(r->ctx_id, r->pid, r->memfd);
  if (!seg.is_ok()) return Status(seg.err());
  PeerQp pq;
  pq.seg = seg.value();
  pq.qp = reinterpret_cast<QpShm*>(pq.seg->base + r->qp_off);
  pq.qpn = qpn;
  if (!pq.valid()) return Status(ENOENT);
  if (pq.qp->rq_off) pq.rq = reinterpret_cast<RqRing*>(pq.seg->base + pq.qp->rq_off);
  if (pq.qp->recv_cq_off) pq.rcq = reinterpret_cast<CqRing*>(pq.seg->base + pq.qp->recv_cq_off);
  qps_[qpn] = pq;
  return pq;
}

Result<PeerSrq> PeerMap::resolve_srq(uint32_t srqn) {
  {
    std::shared_lock<std::shared_mutex> g(mu_);
    auto it = srqs_.find(srqn);
    if (it != srqs_.end() && it->second.valid()) return it->second;
  }
  auto cc = ControlClient::get();
  if (!cc.is_ok()) return Status(cc.err());
  auto r = cc.value()->resolve_qpn(srqn, true);
  if (!r.is_ok()) return Status(r.err());
  std::unique_lock<std::shared_mutex> g(mu_);
  auto seg = map_segment(r->ctx_id, r->pid, r->memfd);
  if (!seg.is_ok()) return Status(seg.err());
  PeerSrq ps;
  ps.seg = seg.value();
  ps.rq = reinterpret_cast<RqRing*>(ps.seg->base + r->qp_off);
  ps.srqn = srqn;
  if (!ps.valid()) return Status(ENOENT);
  srqs_[srqn] = ps;
  return ps;
}

}  // namespace uroce::core
