#include "memory/mr_backing.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "common/log.h"
#include "memory/write_hold.h"

namespace uroce::core {
namespace {

constexpr uint64_t kDefaultMaxShare = 1ull << 30;

struct Backing {
  int fd;
  uint64_t ino;
  uint64_t start, len;
  uint32_t refs;
};

struct Registry {
  std::mutex mu;
  std::vector<Backing> backings;
  bool enabled = true;
  uint64_t max_bytes = kDefaultMaxShare;
};

void on_fork_child();

Registry& reg() {
  static Registry* r = [] {
    auto* n = new Registry();  // lives for the process
    const char* e = getenv("UROCE_MR_SHARE");
    n->enabled = !(e && strcmp(e, "0") == 0);
    if (const char* m = getenv("UROCE_MR_SHARE_MAX")) n->max_bytes = strtoull(m, nullptr, 0);
    pthread_atfork(nullptr, nullptr, on_fork_child);
    return n;
  }();
  return *r;
}

uint64_t page_size() {
  static const uint64_t p = uint64_t(sysconf(_SC_PAGESIZE));
  return p;
}

/// One line of /proc/self/maps.
struct Vma {
  uint64_t start, end;
  char perms[5];
  uint64_t ino;
  std::string path;
};

/// The mappings overlapping [a, b), in address order.
std::vector<Vma> vmas_in(uint64_t a, uint64_t b) {
  std::vector<Vma> out;
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  std::string text;
  char buf[8192];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, size_t(n));
  }
  close(fd);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    Vma v{};
    unsigned long long s = 0, e = 0, off = 0, ino = 0;
    char perms[8] = {};
    int path_at = 0;
    if (sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %llu %n", &s, &e, perms, &off, &ino, &path_at) < 5)
      continue;
    if (e <= a || s >= b) continue;
    v.start = s;
    v.end = e;
    memcpy(v.perms, perms, 4);
    v.ino = ino;
    if (path_at > 0 && size_t(path_at) <= line.size()) v.path = line.substr(size_t(path_at));
    out.push_back(v);
  }
  return out;
}

/// True if [a, b) is mapped, all of it private anonymous read/write memory.
bool private_anonymous(uint64_t a, uint64_t b) {
  uint64_t at = a;
  for (const Vma& v : vmas_in(a, b)) {
    if (v.start > at) return false;  // a hole
    if (memcmp(v.perms, "rw-p", 4) != 0 || v.ino != 0) return false;
    if (!v.path.empty() && v.path != "[heap]" && v.path.rfind("[anon:", 0) != 0) return false;
    at = v.end;
    if (at >= b) return true;
  }
  return false;
}

/// Moves the n-byte mapping at `from` over [to, to+n), replacing what was
/// there. The system call itself, not glibc's mremap: memory hooks that
/// replace mremap in the whole process (UCX's UCM, bistro or GOT patching)
/// take only its first four arguments and pass MREMAP_FIXED on without the
/// new address, so the mapping lands elsewhere and the program keeps private
/// pages a peer never writes. Nor do such hooks need to hear of this move:
/// the program's bytes at `to` do not change.
bool move_mapping(void* from, uint64_t n, uint64_t to) {
  const long r = syscall(SYS_mremap, from, size_t(n), size_t(n), MREMAP_MAYMOVE | MREMAP_FIXED,
                         reinterpret_cast<void*>(to));
  return r != -1 && uint64_t(r) == to;
}

/// Replaces [a, b) by private anonymous pages holding the same bytes. Other
/// threads' and processes' writes are held meanwhile (memory/write_hold.h),
/// except in a fork() child, where nothing else runs yet. False if [a, b)
/// could not be held and stays as it was.
bool make_private(uint64_t a, uint64_t b, bool in_child) {
  const size_t n = b - a;
  void* tmp = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (tmp == MAP_FAILED) return false;
  WriteHold hold;
  if (!in_child && !hold.hold(a, n, /*shmem=*/true)) {
    munmap(tmp, n);
    return false;
  }
  memcpy(tmp, reinterpret_cast<void*>(a), n);
  const bool moved = move_mapping(tmp, n, a);
  hold.release();
  if (!moved) munmap(tmp, n);
  return moved;
}

/// Makes private again whatever of [start, start+len) still maps memfd `ino`
/// (the program may have unmapped or replaced parts of it meanwhile). False
/// if some of it stays shared.
bool unshare(const Backing& bk, bool in_child) {
  bool all = true;
  for (const Vma& v : vmas_in(bk.start, bk.start + bk.len)) {
    if (v.ino != bk.ino || v.perms[3] != 's') continue;
    all &= make_private(std::max(v.start, bk.start), std::min(v.end, bk.start + bk.len), in_child);
  }
  return all;
}

/// A fork() child shares no registered pages with its parent.
void on_fork_child() {
  Registry& r = reg();
  new (&r.mu) std::mutex();  // a parent thread may have held it at fork()
  for (const Backing& bk : r.backings) {
    unshare(bk, /*in_child=*/true);
    close(bk.fd);
  }
  r.backings.clear();
}

/// Moves a copy of [a, a+n) into a new memfd mapped at the same addresses,
/// holding writes to [a, a+n) from the copy to the move: a store another
/// thread or process makes meanwhile lands in the memfd, not in the pages
/// being replaced. False (nothing changed) if writes cannot be held.
bool create_backing(uint64_t a, uint64_t n, Backing* out) {
  int fd = memfd_create("uroce-mr", MFD_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  void* tmp = MAP_FAILED;
  bool moved = false;
  if (ftruncate(fd, off_t(n)) != 0 || fstat(fd, &st) != 0) goto fail;
  tmp = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (tmp == MAP_FAILED) goto fail;
  {
    WriteHold hold;
    if (!hold.hold(a, n, /*shmem=*/false)) {
      munmap(tmp, n);
      goto fail;
    }
    memcpy(tmp, reinterpret_cast<void*>(a), n);
    moved = move_mapping(tmp, n, a);
    hold.release();
  }
  if (!moved) {
    munmap(tmp, n);
    goto fail;
  }
  *out = Backing{fd, uint64_t(st.st_ino), a, n, 1};
  return true;
fail:
  UROCE_LOG(kDebug, "mr share: cannot re-back %#llx+%llu: %s", (unsigned long long)a, (unsigned long long)n,
            strerror(errno));
  close(fd);
  return false;
}

MrShare share_of(const Backing& b) { return MrShare{b.fd, b.ino, b.start}; }

}  // namespace

MrShare mr_share_acquire(uint64_t addr, uint64_t len) {
  Registry& r = reg();
  if (!r.enabled) return {};
  const uint64_t pg = page_size();
  const uint64_t a = (addr + pg - 1) & ~(pg - 1);
  const uint64_t b = (addr + len) & ~(pg - 1);
  if (b <= a || b - a > r.max_bytes || !WriteHold::available()) return {};
  std::lock_guard<std::mutex> g(r.mu);
  // Pages of a live backing are never re-backed (peers map that memfd): a
  // region over them uses the backing that overlaps it most; the parts it
  // does not cover go through process_vm_*.
  Backing* best = nullptr;
  uint64_t best_overlap = 0;
  for (Backing& bk : r.backings) {
    uint64_t lo = std::max(a, bk.start), hi = std::min(b, bk.start + bk.len);
    if (hi > lo && hi - lo > best_overlap) {
      best = &bk;
      best_overlap = hi - lo;
    }
  }
  if (best) {
    best->refs++;
    return share_of(*best);
  }
  if (!private_anonymous(a, b)) return {};
  Backing bk{};
  if (!create_backing(a, b - a, &bk)) return {};
  r.backings.push_back(bk);
  return share_of(bk);
}

void mr_share_release(const MrShare& s) {
  if (s.fd < 0) return;
  Registry& r = reg();
  std::lock_guard<std::mutex> g(r.mu);
  // A backing left shared because its writes could not be held (the
  // program put its own userfaultfd on those pages, say) is tried again
  // here; until then a region over those pages reuses it.
  for (size_t i = 0; i < r.backings.size();) {
    Backing& bk = r.backings[i];
    if (bk.fd == s.fd && bk.ino == s.ino && bk.refs > 0) --bk.refs;
    if (bk.refs == 0 && unshare(bk, /*in_child=*/false)) {
      close(bk.fd);
      r.backings.erase(r.backings.begin() + long(i));
      continue;
    }
    ++i;
  }
}

}  // namespace uroce::core
