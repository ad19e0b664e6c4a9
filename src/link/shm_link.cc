#include "link/shm_link.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "common/clock.h"
#include "common/iov.h"

namespace uroce::link {

namespace {
std::atomic<int32_t> g_self_pid{0};
}

/// This process's pid, cached. After fork() the child must not keep the
/// parent's: a child that believed it was its parent would "copy to the peer"
/// into its own memory and report success. The atfork handler resets it.
int32_t self_pid() {
  int32_t p = g_self_pid.load(std::memory_order_relaxed);
  if (__builtin_expect(p != 0, 1)) return p;
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, [] { g_self_pid.store(0); }); });
  p = getpid();
  g_self_pid.store(p, std::memory_order_relaxed);
  return p;
}

void copy_local_iov(const iovec* dst, size_t nd, const iovec* src, size_t ns) {
  size_t di = 0, doff = 0, si = 0, soff = 0;
  while (di < nd && si < ns) {
    size_t n = std::min(dst[di].iov_len - doff, src[si].iov_len - soff);
    memcpy(static_cast<char*>(dst[di].iov_base) + doff, static_cast<const char*>(src[si].iov_base) + soff, n);
    doff += n;
    soff += n;
    if (doff == dst[di].iov_len) ++di, doff = 0;
    if (soff == src[si].iov_len) ++si, soff = 0;
  }
}

namespace {

int vm_result(ssize_t got, size_t want) {
  if (got < 0) return -errno;
  return size_t(got) == want ? 0 : -EFAULT;
}

}  // namespace

int copy_to_peer(int32_t pid, const iovec* local, size_t n_local, const iovec* remote, size_t n_remote) {
  size_t want = iov_bytes({local, n_local});
  if (want == 0) return 0;
  if (pid == self_pid()) {
    copy_local(remote, n_remote, local, n_local);
    return 0;
  }
  return vm_result(process_vm_writev(pid, local, n_local, remote, n_remote, 0), want);
}

int copy_from_peer(int32_t pid, const iovec* local, size_t n_local, const iovec* remote, size_t n_remote) {
  size_t want = iov_bytes({local, n_local});
  if (want == 0) return 0;
  if (pid == self_pid()) {
    copy_local(local, n_local, remote, n_remote);
    return 0;
  }
  return vm_result(process_vm_readv(pid, local, n_local, remote, n_remote, 0), want);
}

namespace {

constexpr uint64_t kLockTimeoutNs = 2000000000ull;

/// Acquires the stripe; steals it from a holder that no longer exists.
bool stripe_lock(AtomicStripe& s) {
  const int32_t me = self_pid();
  uint64_t deadline = 0;
  for (uint32_t spins = 0;; ++spins) {
    int32_t expect = 0;
    if (s.holder.compare_exchange_weak(expect, me, std::memory_order_acquire)) return true;
    cpu_relax();
    if ((spins & 1023) == 1023) {
      if (expect != 0 && kill(expect, 0) != 0 && errno == ESRCH) {
        s.holder.compare_exchange_strong(expect, 0, std::memory_order_relaxed);
        continue;
      }
      uint64_t now = now_ns();
      if (!deadline) deadline = now + kLockTimeoutNs;
      if (now > deadline) return false;
      sched_yield();
    }
  }
}

}  // namespace

int atomic_on_peer(AtomicStripe* stripes, int32_t pid, uint64_t remote_addr, uint64_t* mapped, AtomicOp op,
                   uint64_t compare_add, uint64_t swap, uint64_t* orig) {
  uint64_t h = (uint64_t(uint32_t(pid)) * 0x9E3779B97F4A7C15ull) ^ (remote_addr >> 3);
  h ^= h >> 29;
  AtomicStripe& s = stripes[h % kAtomicStripes];
  if (!stripe_lock(s)) return -EDEADLK;
  if (mapped) {
    // Same stripe as the process_vm_* path: atomic against it too.
    std::atomic_ref<uint64_t> w(*mapped);
    uint64_t cur = w.load(std::memory_order_relaxed);
    *orig = cur;
    if (op == AtomicOp::kFetchAdd)
      w.store(cur + compare_add, std::memory_order_relaxed);
    else if (op == AtomicOp::kStore)
      w.store(swap, std::memory_order_release);  // after everything the QP wrote before it
    else if (cur == compare_add)
      w.store(swap, std::memory_order_relaxed);
    s.holder.store(0, std::memory_order_release);  // pairs with stripe_lock's acquire CAS
    return 0;
  }
  uint64_t cur = 0;
  iovec l{&cur, 8};
  iovec r{reinterpret_cast<void*>(remote_addr), 8};
  int rc = copy_from_peer(pid, &l, 1, &r, 1);
  if (rc == 0) {
    *orig = cur;
    uint64_t next = cur;
    if (op == AtomicOp::kFetchAdd)
      next = cur + compare_add;
    else if (op == AtomicOp::kStore || cur == compare_add)
      next = swap;
    if (next != cur || op != AtomicOp::kCmpSwap) {
      l.iov_base = &next;
      rc = copy_to_peer(pid, &l, 1, &r, 1);
    }
  }
  s.holder.store(0, std::memory_order_release);  // pairs with stripe_lock's acquire CAS
  return rc;
}

}  // namespace uroce::link
