#include "daemon/registry.h"

#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <random>

#include "common/log.h"

namespace uroce::daemon {

using core::QpShm;
using core::QpState;
using core::SegHeader;

uint32_t Registry::first_qpn() {
  std::random_device rd;
  return 0x11 + rd() % 0x10000;  // 24-bit QPNs; plenty left above
}

Registry::~Registry() {
  for (auto& [id, c] : ctxs_) drop_ctx(c, false);
}

Result<uint32_t> Registry::register_ctx(int client_fd, int32_t pid, int memfd) {
  struct stat st;
  if (memfd < 0 || fstat(memfd, &st) != 0 || size_t(st.st_size) < sizeof(SegHeader)) return Status(EINVAL);
  void* base =
      mmap(nullptr, core::kSegReserveBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd, 0);
  if (base == MAP_FAILED) return Status(errno);
  auto* seg = static_cast<SegHeader*>(base);
  if (seg->magic != core::kSegMagic) {
    munmap(base, core::kSegReserveBytes);
    return Status(EINVAL);
  }
  uint32_t id = next_ctx_id_++;
  if (next_ctx_id_ == 0) next_ctx_id_ = 1;
  seg->ctx_id = id;
  CtxRecord& c = ctxs_[id];
  c.ctx_id = id;
  c.client_fd = client_fd;
  c.memfd = memfd;
  c.pid = pid;
  c.seg = seg;
  return id;
}

CtxRecord* Registry::find_ctx(int client_fd, uint32_t ctx_id) {
  auto it = ctxs_.find(ctx_id);
  if (it == ctxs_.end() || it->second.client_fd != client_fd) return nullptr;
  return &it->second;
}

void Registry::drop_ctx(CtxRecord& c, bool dead) {
  auto* base = reinterpret_cast<uint8_t*>(c.seg);
  for (uint32_t qpn : c.qpns) {
    auto it = qpns_.find(qpn);
    if (it == qpns_.end()) continue;
    if (dead && !it->second.is_srq) {
      // Like a NIC reset: the QP stops answering; requesters time out.
      auto* q = reinterpret_cast<QpShm*>(base + it->second.off);
      q->state.store(uint32_t(QpState::kErr), std::memory_order_release);
    }
    qpns_.erase(it);
  }
  if (dead) c.seg->alive.store(0, std::memory_order_release);  // pairs with peers' acquire loads
  munmap(c.seg, core::kSegReserveBytes);
  close(c.memfd);
}

void Registry::unregister_ctx(int client_fd, uint32_t ctx_id) {
  CtxRecord* c = find_ctx(client_fd, ctx_id);
  if (!c) return;
  drop_ctx(*c, true);
  ctxs_.erase(ctx_id);
}

Result<uint32_t> Registry::alloc_qpn(int client_fd, uint32_t ctx_id, uint64_t qp_off, bool is_srq) {
  CtxRecord* c = find_ctx(client_fd, ctx_id);
  if (!c) return Status(EINVAL);
  for (uint32_t tries = 0; tries < (1u << 24); ++tries) {
    uint32_t q = next_qpn_++;
    if (next_qpn_ > 0xffffff) next_qpn_ = 0x11;
    if (q < 2 || qpns_.count(q)) continue;
    qpns_[q] = {ctx_id, qp_off, is_srq};
    c->qpns.insert(q);
    return q;
  }
  return Status(ENOSPC);
}

void Registry::free_qpn(int client_fd, uint32_t qpn) {
  auto it = qpns_.find(qpn);
  if (it == qpns_.end()) return;
  CtxRecord* c = find_ctx(client_fd, it->second.ctx_id);
  if (!c) return;
  c->qpns.erase(qpn);
  qpns_.erase(it);
}

Result<uint32_t> Registry::alloc_key(int client_fd, uint32_t ctx_id, uint32_t slot) {
  if (!find_ctx(client_fd, ctx_id) || slot == 0 || slot >= core::kMaxMrPerContext) return Status(EINVAL);
  uint16_t r = 0;
  while (r == 0) {
    if (getrandom(&r, sizeof(r), 0) != sizeof(r)) return Status(EIO);
  }
  return core::make_key(slot, r);
}

Result<Registry::Resolved> Registry::resolve_qpn(uint32_t qpn, bool want_srq) const {
  auto it = qpns_.find(qpn);
  if (it == qpns_.end() || it->second.is_srq != want_srq) return Status(ENOENT);
  const CtxRecord& c = ctxs_.at(it->second.ctx_id);
  return Resolved{c.pid, c.ctx_id, it->second.off, c.memfd};
}

uint32_t Registry::open_xrcd(uint64_t dev, uint64_t ino) {
  if (dev == 0 && ino == 0) return next_xrcd_++;  // no file: a domain of its own
  auto [it, fresh] = xrcds_.try_emplace({dev, ino}, next_xrcd_);
  if (fresh) ++next_xrcd_;
  return it->second;
}

void Registry::client_gone(int client_fd) {
  for (auto it = ctxs_.begin(); it != ctxs_.end();) {
    if (it->second.client_fd == client_fd) {
      UROCE_INFO("uroced: context %u of pid %d gone", it->first, it->second.pid);
      drop_ctx(it->second, true);
      it = ctxs_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace uroce::daemon
