#include "daemon/registry.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>

#include "common/log.h"

namespace uroce::daemon {

using core::QpShm;
using core::QpState;
using core::SegHeader;

uint32_t Registry::random_qpn() {
  constexpr uint32_t kFirst = 0x11, kLast = 0xfffffe;  // 0xffffff: multicast
  // One getrandom per kRandomBatch numbers (a batch of QPNs is one request).
  if (random_left_ == 0) {
    if (getrandom(random_, sizeof(random_), 0) != ssize_t(sizeof(random_)))
      for (uint32_t& r : random_) r = uint32_t(std::random_device{}());
    random_left_ = kRandomBatch;
  }
  const uint32_t r = random_[--random_left_];
  return kFirst + r % (kLast - kFirst + 1);
}

Registry::Registry(RegistryLimits limits) : limits_(limits) {
  // Without the directory every resolution asks uroced: slower, not wrong.
  dir_fd_ = memfd_create("uroce-qpdir", MFD_CLOEXEC);
  if (dir_fd_ < 0 || ftruncate(dir_fd_, sizeof(core::QpDirectory)) != 0) {
    UROCE_INFO("uroced: no QP directory (%s): QP numbers are resolved by request", strerror(errno));
    return;
  }
  void* p =
      mmap(nullptr, sizeof(core::QpDirectory), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, dir_fd_, 0);
  if (p == MAP_FAILED) return;
  dir_ = static_cast<core::QpDirectory*>(p);
  dir_->magic = core::QpDirectory::kMagic;
  // Read-only: a client can map the directory but not write it. One
  // descriptor, passed to every client (each gets its own copy).
  const std::string path = "/proc/self/fd/" + std::to_string(dir_fd_);
  dir_ro_fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
}

Registry::~Registry() {
  for (auto& [id, c] : ctxs_) drop_ctx(c, false);
  if (dir_) munmap(dir_, sizeof(core::QpDirectory));
  if (dir_fd_ >= 0) close(dir_fd_);
  if (dir_ro_fd_ >= 0) close(dir_ro_fd_);
}

void Registry::publish(uint32_t qpn, uint32_t ctx_id, int32_t pid, uint64_t off, bool is_srq) {
  if (dir_) core::qp_dir_put(dir_, qpn, ctx_id, pid, off, is_srq);
}

namespace {
/// The size of a context segment's memfd, or 0 if `fd` is not one uroced may
/// map: a memfd (or other shmem file) sealed against shrinking, so that
/// nothing it holds can vanish under a store (SIGBUS) once checked in bounds.
uint64_t sealed_size(int fd) {
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK) || (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE))) return 0;
  return uint64_t(st.st_size);
}

/// The device a context opened, as its owner wrote it (any bytes: cut at
/// the first NUL or at the field's end).
std::string seg_dev_name(const SegHeader* h) {
  char n[sizeof(SegHeader::dev_name) + 1] = {};
  memcpy(n, h->dev_name, sizeof(SegHeader::dev_name));
  return n;
}

/// Copies the NetCounters at `off` of a segment of `size` bytes, if `off`
/// names one (a client writes the offsets: checked, never trusted).
bool read_counters(const SegHeader* h, uint64_t size, uint64_t off, core::NetCounters* out) {
  if (!off || off % 8 || off < sizeof(SegHeader) || off > size || size - off < sizeof(core::NetCounters))
    return false;
  memcpy(out, reinterpret_cast<const uint8_t*>(h) + off, sizeof(*out));
  return out->magic == core::NetCounters::kMagic;
}
}  // namespace

Result<uint32_t> Registry::register_ctx(int client_fd, int32_t pid, int memfd) {
  ClientShare& share = clients_[client_fd];
  Status refuse;
  const uint64_t size = sealed_size(memfd);
  if (size < sizeof(SegHeader) || size > core::kSegReserveBytes)
    refuse = Status(EINVAL);
  else if (share.ctxs >= limits_.ctxs_per_client)
    refuse = Status(ENOMEM);
  else if (ctxs_.size() >= limits_.ctxs)
    refuse = Status(EAGAIN);
  if (!refuse) {
    if (memfd >= 0) close(memfd);
    return refuse;
  }
  void* base =
      mmap(nullptr, core::kSegReserveBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd, 0);
  if (base == MAP_FAILED) {
    const int e = errno;
    close(memfd);
    return Status(e);
  }
  auto* seg = static_cast<SegHeader*>(base);
  if (seg->magic != core::kSegMagic) {
    munmap(base, core::kSegReserveBytes);
    close(memfd);
    return Status(EINVAL);
  }
  ++share.ctxs;
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
  // What the context's QPs counted stays in its device's totals.
  add_ctx_counters(c, &retired_[seg_dev_name(c.seg)]);
  auto* base = reinterpret_cast<uint8_t*>(c.seg);
  for (uint32_t qpn : c.qpns) {
    auto it = qpns_.find(qpn);
    if (it == qpns_.end()) continue;
    if (dead && !it->second.is_srq) {
      // Like a NIC reset: the QP stops answering; requesters time out.
      (void)core::qp_enter_error(*reinterpret_cast<QpShm*>(base + it->second.off));
    }
    publish(qpn, 0, 0, 0, false);
    qpns_.erase(it);
  }
  if (dead) c.seg->alive.store(0, std::memory_order_release);  // pairs with peers' acquire loads
  munmap(c.seg, core::kSegReserveBytes);
  close(c.memfd);
  auto s = clients_.find(c.client_fd);
  if (s != clients_.end()) {
    --s->second.ctxs;
    s->second.qpns -= std::min<uint32_t>(s->second.qpns, uint32_t(c.qpns.size()));
  }
}

void Registry::unregister_ctx(int client_fd, uint32_t ctx_id) {
  CtxRecord* c = find_ctx(client_fd, ctx_id);
  if (!c) return;
  drop_ctx(*c, true);
  ctxs_.erase(ctx_id);
}

Result<uint32_t> Registry::alloc_qpn(int client_fd, uint32_t ctx_id, uint64_t qp_off, bool is_srq) {
  uint32_t qpn = 0;
  auto r = alloc_qpns(client_fd, ctx_id, qp_off, 0, 1, is_srq, &qpn);
  if (!r.is_ok()) return Status(r.err());
  return qpn;
}

Result<uint32_t> Registry::alloc_qpns(int client_fd, uint32_t ctx_id, uint64_t off, uint64_t stride,
                                      uint32_t n, bool is_srq, uint32_t* out) {
  CtxRecord* c = find_ctx(client_fd, ctx_id);
  if (!c || n == 0) return Status(EINVAL);
  // uroced stores into the QP when its process dies (drop_ctx): each must
  // lie inside the segment, which can only grow (sealed_size).
  const uint64_t need = is_srq ? sizeof(core::RqRing) : sizeof(QpShm);
  const uint64_t size = sealed_size(c->memfd);
  if (n > 1 && (stride < need || stride % core::kCacheLine)) return Status(EINVAL);
  const uint64_t last = off + uint64_t(n - 1) * stride;
  if (off < sizeof(SegHeader) || off % core::kCacheLine || last < off || last > size || size - last < need)
    return Status(EINVAL);
  ClientShare& share = clients_[client_fd];
  uint32_t got = 0;
  for (; got < n; ++got) {
    if (share.qpns >= limits_.qpns_per_client) break;
    if (qpns_.size() >= limits_.qpns) break;
    uint32_t q = 0;
    for (uint32_t tries = 0; tries < 64 && q == 0; ++tries) {
      q = random_qpn();
      if (qpns_.count(q)) q = 0;
    }
    if (q == 0) break;
    const uint64_t at = off + got * stride;
    qpns_[q] = {ctx_id, at, is_srq};
    c->qpns.insert(q);
    publish(q, ctx_id, c->pid, at, is_srq);
    ++share.qpns;
    out[got] = q;
  }
  if (got > 0) return got;
  if (share.qpns >= limits_.qpns_per_client) return Status(ENOMEM);
  if (qpns_.size() >= limits_.qpns) return Status(EAGAIN);
  return Status(ENOSPC);
}

void Registry::free_qpn(int client_fd, uint32_t qpn) {
  auto it = qpns_.find(qpn);
  if (it == qpns_.end()) return;
  CtxRecord* c = find_ctx(client_fd, it->second.ctx_id);
  if (!c) return;
  c->qpns.erase(qpn);
  qpns_.erase(it);
  publish(qpn, 0, 0, 0, false);
  ClientShare& share = clients_[client_fd];
  if (share.qpns) --share.qpns;
}

bool Registry::owns_qpn(int client_fd, uint32_t qpn) {
  auto it = qpns_.find(qpn);
  return it != qpns_.end() && !it->second.is_srq && find_ctx(client_fd, it->second.ctx_id) != nullptr;
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

Result<uint32_t> Registry::open_xrcd(int client_fd, uint64_t dev, uint64_t ino) {
  auto next_id = [this] {
    if (next_xrcd_ == 0) next_xrcd_ = 1;
    return next_xrcd_++;
  };
  if (dev == 0 && ino == 0) return next_id();  // no file: a domain of its own
  ClientShare& share = clients_[client_fd];
  const std::pair<uint64_t, uint64_t> file{dev, ino};
  auto it = xrcds_.find(file);
  if (share.xrcds.count(file)) return it->second.id;
  if (share.xrcds.size() >= limits_.xrcds_per_client) return Status(ENOMEM);
  if (it == xrcds_.end()) it = xrcds_.emplace(file, XrcdRecord{next_id(), 0}).first;
  ++it->second.users;
  share.xrcds.insert(file);
  return it->second.id;
}

void Registry::client_gone(int client_fd) {
  if (auto s = clients_.find(client_fd); s != clients_.end()) {
    for (const auto& file : s->second.xrcds) {
      auto x = xrcds_.find(file);
      if (x != xrcds_.end() && --x->second.users == 0) xrcds_.erase(x);
    }
  }
  for (auto it = ctxs_.begin(); it != ctxs_.end();) {
    if (it->second.client_fd == client_fd) {
      UROCE_INFO("uroced: context %u of pid %d gone", it->first, it->second.pid);
      drop_ctx(it->second, true);
      it = ctxs_.erase(it);
    } else {
      ++it;
    }
  }
  clients_.erase(client_fd);
}

void Registry::visit_ctx(const CtxRecord& c, FnRef<void(const core::NetCounters&)> retired,
                         FnRef<void(uint32_t, const QpShm&, const core::NetCounters*)> qp) const {
  const uint64_t size = sealed_size(c.memfd);
  core::NetCounters k;
  if (read_counters(c.seg, size, c.seg->counters_off.load(std::memory_order_acquire), &k)) retired(k);
  const auto* base = reinterpret_cast<const uint8_t*>(c.seg);
  for (uint32_t qpn : c.qpns) {
    auto it = qpns_.find(qpn);
    if (it == qpns_.end() || it->second.is_srq) continue;
    const auto* q = reinterpret_cast<const QpShm*>(base + it->second.off);  // checked at alloc_qpn
    const bool has = read_counters(c.seg, size, q->counters_off.load(std::memory_order_acquire), &k);
    qp(qpn, *q, has ? &k : nullptr);
  }
}

void Registry::add_ctx_counters(const CtxRecord& c, core::NetCounters* into) const {
  visit_ctx(
      c, [&](const core::NetCounters& k) { core::add_counters(into, k); },
      [&](uint32_t, const QpShm&, const core::NetCounters* k) {
        if (k) core::add_counters(into, *k);
      });
}

int Registry::report(int32_t uroced_pid) const {
  std::vector<core::ReportQp> qps;
  std::map<std::string, core::ReportDev> devs;
  for (const auto& [name, k] : retired_) devs[name].counters = k;
  for (const auto& entry : ctxs_) {
    const CtxRecord& c = entry.second;  // named: clang 14 lets no lambda capture a structured binding
    const std::string dev = seg_dev_name(c.seg);
    core::ReportDev& d = devs[dev];
    visit_ctx(
        c, [&](const core::NetCounters& k) { core::add_counters(&d.counters, k); },
        [&](uint32_t qpn, const QpShm& q, const core::NetCounters* k) {
          core::ReportQp r{};
          r.qpn = qpn;
          r.ctx_id = c.ctx_id;
          r.pid = c.pid;
          r.type = __atomic_load_n(&q.qp_type, __ATOMIC_RELAXED);
          r.state = q.state.load(std::memory_order_acquire);
          r.dest_qpn = __atomic_load_n(&q.dest_qpn, __ATOMIC_RELAXED);
          r.link = q.link.load(std::memory_order_relaxed);  // any value: named "?" by the tool
          memcpy(r.dev, dev.c_str(), std::min(dev.size(), sizeof(r.dev) - 1));
          if (k) {
            r.has_counters = 1;
            r.counters = *k;
            core::add_counters(&d.counters, *k);
          }
          ++d.qps;
          qps.push_back(r);
        });
  }
  core::ReportHeader h{};
  h.magic = core::ReportHeader::kMagic;
  h.num_qps = uint32_t(qps.size());
  h.num_devs = uint32_t(devs.size());
  h.uroced_pid = uroced_pid;
  int fd = memfd_create("uroce-report", MFD_CLOEXEC);
  if (fd < 0) return -1;
  bool ok = write(fd, &h, sizeof(h)) == ssize_t(sizeof(h));
  for (const core::ReportQp& r : qps) ok = ok && write(fd, &r, sizeof(r)) == ssize_t(sizeof(r));
  for (auto& [name, d] : devs) {
    memcpy(d.dev, name.c_str(), std::min(name.size(), sizeof(d.dev) - 1));
    ok = ok && write(fd, &d, sizeof(d)) == ssize_t(sizeof(d));
  }
  if (!ok) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace uroce::daemon
