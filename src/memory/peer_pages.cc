#include "memory/peer_pages.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/log.h"

namespace uroce::core {

/// Bumped whenever a mapping is retired (namespace scope: no init guard on the data path).
std::atomic<uint64_t> g_peer_pages_gen{1};

namespace {

/// A retired mapping stays (as inaccessible-to-peers private memory) this
/// long before it is unmapped, so a thread of ours still copying into it
/// (it raced with the region's deregistration) writes into a harmless sink.
constexpr uint64_t kSinkNs = 5'000'000'000ull;

struct Mapping {
  const PeerSegment* seg;
  uint64_t ino;
  uint64_t start, len;  // owner addresses [start, start+len)
  uint8_t* local;       // nullptr: could not be mapped (use process_vm_*)
  uint32_t slot, key;   // the region that led here (the sweep checks it still names ino)
  uint64_t retired_ns;
};

struct State {
  std::mutex mu;
  std::unordered_map<uint64_t, std::vector<Mapping*>> live;  // by ino
  std::vector<Mapping*> sunk;
};

State& st() {
  static State* s = [] {
    auto* n = new State();  // lives for the process
    pthread_atfork(nullptr, nullptr, [] { new (&st().mu) std::mutex(); });
    return n;
  }();
  return *s;
}

struct LastHit {
  Mapping* m = nullptr;
  uint64_t gen = 0;
};
// initial-exec: a plain %fs-relative load, no __tls_get_addr call per operation.
__attribute__((tls_model("initial-exec"))) thread_local LastHit t_last;

/// Gets the owner's memfd and maps all of it; m->local stays null on failure.
void map_backing(Mapping* m, int32_t pid, int32_t fd_num) {
  int pidfd = int(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) return;
  int fd = int(syscall(SYS_pidfd_getfd, pidfd, fd_num, 0));
  close(pidfd);
  if (fd < 0) {
    UROCE_DBG("peer pages: pidfd_getfd(%d, %d): %s", pid, fd_num, strerror(errno));
    return;
  }
  struct stat s {};
  if (fstat(fd, &s) == 0 && uint64_t(s.st_ino) == m->ino && s.st_size > 0) {
    void* p = mmap(nullptr, size_t(s.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      m->local = static_cast<uint8_t*>(p);
      m->len = uint64_t(s.st_size);
    }
  }
  close(fd);
}

/// Turns a mapping into a sink (caller holds st().mu).
void retire(State& s, Mapping* m) {
  if (m->local)
    mmap(m->local, m->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
         -1, 0);
  m->retired_ns = now_ns();
  g_peer_pages_gen.fetch_add(1, std::memory_order_release);  // pairs with peer_pages' acquire
  s.sunk.push_back(m);
}

bool still_used(const Mapping* m) {
  if (!seg_owner_alive(m->seg->header())) return false;
  const MrEntry* e = m->seg->mr_entry(m->slot);
  MrView v;
  return e && mr_read(e, m->key, &v) && v.share_ino == m->ino;
}

void drop_old_sinks(State& s) {
  const uint64_t now = now_ns();
  size_t keep = 0;
  for (Mapping* m : s.sunk) {
    if (now - m->retired_ns < kSinkNs) {
      s.sunk[keep++] = m;
      continue;
    }
    if (m->local) munmap(m->local, m->len);
    delete m;
  }
  s.sunk.resize(keep);
}

template <typename Pred>
void retire_if(State& s, Pred stale) {
  for (auto it = s.live.begin(); it != s.live.end();) {
    auto& v = it->second;
    size_t keep = 0;
    for (Mapping* m : v) {
      if (stale(m))
        retire(s, m);
      else
        v[keep++] = m;
    }
    v.resize(keep);
    it = v.empty() ? s.live.erase(it) : std::next(it);
  }
}

}  // namespace

uint8_t* peer_pages(PeerSegment* seg, const MrView& mr, uint32_t slot, uint64_t vaddr, uint64_t len) {
  if (mr.share_fd < 0 || vaddr < mr.share_start) return nullptr;
  Mapping* m = t_last.m;
  if (!m || t_last.gen != g_peer_pages_gen.load(std::memory_order_acquire) || m->seg != seg ||
      m->ino != mr.share_ino) {
    State& s = st();
    std::lock_guard<std::mutex> g(s.mu);
    m = nullptr;
    auto it = s.live.find(mr.share_ino);
    if (it != s.live.end())
      for (Mapping* c : it->second)
        if (c->seg == seg) m = c;
    if (!m) {
      m = new Mapping{seg, mr.share_ino, mr.share_start, 0, nullptr, slot, mr.key, 0};
      map_backing(m, seg->pid, mr.share_fd);
      s.live[mr.share_ino].push_back(m);
    }
    t_last = LastHit{m, g_peer_pages_gen.load(std::memory_order_relaxed)};
  }
  if (!m->local) return nullptr;
  const uint64_t off = vaddr - m->start;
  if (off > m->len || len > m->len - off) return nullptr;
  return m->local + off;
}

void peer_pages_sweep() {
  State& s = st();
  std::lock_guard<std::mutex> g(s.mu);
  retire_if(s, [](const Mapping* m) { return !still_used(m); });
  drop_old_sinks(s);
}

void peer_pages_forget(const PeerSegment* seg) {
  State& s = st();
  std::lock_guard<std::mutex> g(s.mu);
  retire_if(s, [seg](const Mapping* m) { return m->seg == seg; });
}

}  // namespace uroce::core
