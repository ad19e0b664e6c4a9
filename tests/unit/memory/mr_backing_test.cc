// Re-backing registered pages with a memfd (memory/mr_backing.h): which memory
// is shared, that its bytes survive every transition, that the sharing is
// real (a second mapping of the memfd sees the program's stores and the
// other way round), that it ends with the last user, and that a fork() child
// and its parent stop sharing.
#include "memory/mr_backing.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "memory/write_hold.h"

namespace {
/// While set, mremap behaves as UCX's memory hooks make it behave in every
/// process that loads UCX (ucm_override_mremap takes four arguments): the
/// fifth, MREMAP_FIXED's new address, is not passed on and the kernel gets
/// whatever else was at hand, here this decoy.
std::atomic<void*> g_mremap_decoy{nullptr};
}  // namespace

/// The test program's own mremap, found before glibc's by every caller in
/// the process (as a hook that patches it would be).
extern "C" void* mremap(void* old_address, size_t old_size, size_t new_size, int flags, ...) noexcept {
  void* new_address = nullptr;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    new_address = va_arg(ap, void*);
    va_end(ap);
    if (void* decoy = g_mremap_decoy.load()) new_address = decoy;
  }
  return reinterpret_cast<void*>(syscall(SYS_mremap, old_address, old_size, new_size, flags, new_address));
}

namespace uroce::core {
namespace {

const uint64_t kPage = uint64_t(sysconf(_SC_PAGESIZE));

// Pages are re-backed only where writes can be held during the move
// (memory/write_hold.h): root here, or a host that lets users' userfaultfds
// take kernel faults.
#define REQUIRE_WRITE_HOLD()                                                           \
  if (!WriteHold::available())                                                         \
  GTEST_SKIP() << "userfaultfd cannot hold kernel faults here (not root, "             \
                  "vm.unprivileged_userfaultfd=0, no /dev/userfaultfd access): pages " \
                  "are never re-backed"

/// A private anonymous mapping of `pages` pages filled with a pattern.
struct AnonBuf {
  explicit AnonBuf(size_t pages) : len(pages * kPage) {
    void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    p = m == MAP_FAILED ? nullptr : static_cast<uint8_t*>(m);
    if (p)
      for (size_t i = 0; i < len; ++i) p[i] = uint8_t(i * 7 + 3);
  }
  ~AnonBuf() {
    if (p) munmap(p, len);
  }
  bool intact(size_t from = 0, size_t to = SIZE_MAX) const {
    for (size_t i = from; i < std::min(to, len); ++i)
      if (p[i] != uint8_t(i * 7 + 3)) return false;
    return true;
  }
  uint64_t addr(size_t off = 0) const { return reinterpret_cast<uint64_t>(p) + off; }
  uint8_t* p;
  size_t len;
};

/// Bytes of [a, b) that /proc/self/maps shows as a shared mapping of inode `ino`.
uint64_t shared_bytes(uint64_t a, uint64_t b, uint64_t ino) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  uint64_t total = 0;
  while (std::getline(maps, line)) {
    unsigned long long s, e, off, i;
    char perms[8];
    if (sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %llu", &s, &e, perms, &off, &i) != 5) continue;
    if (i != ino || perms[3] != 's') continue;
    uint64_t lo = std::max<uint64_t>(a, s), hi = std::min<uint64_t>(b, e);
    if (hi > lo) total += hi - lo;
  }
  return total;
}

/// A second mapping of the backing's memfd, as a peer would get it.
uint8_t* map_backing(const MrShare& s, size_t len) {
  int fd = open(("/proc/self/fd/" + std::to_string(s.fd)).c_str(), O_RDWR);
  if (fd < 0) return nullptr;
  void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return m == MAP_FAILED ? nullptr : static_cast<uint8_t*>(m);
}

TEST(MrBacking, WholePagesAreSharedAndTheBytesSurviveBothWays) {
  REQUIRE_WRITE_HOLD();
  AnonBuf b(16);
  ASSERT_TRUE(b.p);
  // From the middle of page 0 to the middle of page 15: pages 1..14 shared.
  MrShare s = mr_share_acquire(b.addr(100), 15 * kPage);
  ASSERT_GE(s.fd, 0);
  EXPECT_EQ(s.start, b.addr(kPage));
  EXPECT_EQ(shared_bytes(b.addr(), b.addr(b.len), s.ino), 14 * kPage);
  EXPECT_TRUE(b.intact());

  uint8_t* peer = map_backing(s, 14 * kPage);
  ASSERT_TRUE(peer);
  EXPECT_EQ(memcmp(peer, b.p + kPage, 14 * kPage), 0);
  peer[5] = 0xAB;  // a peer's store is the program's memory
  EXPECT_EQ(b.p[kPage + 5], 0xAB);
  b.p[kPage + 6] = 0xCD;  // and the other way round
  EXPECT_EQ(peer[6], 0xCD);
  munmap(peer, 14 * kPage);

  mr_share_release(s);
  EXPECT_EQ(shared_bytes(b.addr(), b.addr(b.len), s.ino), 0u);
  EXPECT_EQ(b.p[kPage + 5], 0xAB);
  EXPECT_EQ(b.p[kPage + 6], 0xCD);
  EXPECT_TRUE(b.intact(0, kPage + 5));
  EXPECT_TRUE(b.intact(kPage + 7));
}

TEST(MrBacking, RegionsOverTheSamePagesShareOneBackingUntilTheLastGoes) {
  REQUIRE_WRITE_HOLD();
  AnonBuf b(8);
  ASSERT_TRUE(b.p);
  MrShare s1 = mr_share_acquire(b.addr(), b.len);
  MrShare s2 = mr_share_acquire(b.addr(kPage), 2 * kPage);  // inside the first
  ASSERT_GE(s1.fd, 0);
  EXPECT_EQ(s2.fd, s1.fd);
  EXPECT_EQ(s2.ino, s1.ino);
  mr_share_release(s1);
  EXPECT_EQ(shared_bytes(b.addr(), b.addr(b.len), s1.ino), b.len);
  mr_share_release(s2);
  EXPECT_EQ(shared_bytes(b.addr(), b.addr(b.len), s1.ino), 0u);
  EXPECT_TRUE(b.intact());
}

TEST(MrBacking, MemoryThatCannotBeSharedStaysAsItIs) {
  AnonBuf b(4);
  ASSERT_TRUE(b.p);
  // Less than one whole page.
  EXPECT_LT(mr_share_acquire(b.addr(10), kPage).fd, 0);
  // A file mapping.
  int fd = memfd_create("not-anonymous", 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, off_t(4 * kPage)), 0);
  void* f = mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(f, MAP_FAILED);
  EXPECT_LT(mr_share_acquire(reinterpret_cast<uint64_t>(f), 4 * kPage).fd, 0);
  munmap(f, 4 * kPage);
  close(fd);
  // Read-only memory.
  ASSERT_EQ(mprotect(b.p, b.len, PROT_READ), 0);
  EXPECT_LT(mr_share_acquire(b.addr(), b.len).fd, 0);
  // A range with a hole in it.
  ASSERT_EQ(mprotect(b.p, b.len, PROT_READ | PROT_WRITE), 0);
  ASSERT_EQ(munmap(b.p + kPage, kPage), 0);
  EXPECT_LT(mr_share_acquire(b.addr(), b.len).fd, 0);
}

TEST(MrBacking, ReleaseLeavesAloneWhatTheProgramMappedThereMeanwhile) {
  REQUIRE_WRITE_HOLD();
  AnonBuf b(4);
  ASSERT_TRUE(b.p);
  MrShare s = mr_share_acquire(b.addr(), b.len);
  ASSERT_GE(s.fd, 0);
  // The program replaces page 2 with a fresh mapping of its own.
  void* m =
      mmap(b.p + 2 * kPage, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  ASSERT_EQ(m, b.p + 2 * kPage);
  memset(m, 0x5A, kPage);
  mr_share_release(s);
  EXPECT_EQ(shared_bytes(b.addr(), b.addr(b.len), s.ino), 0u);
  for (size_t i = 0; i < kPage; ++i) ASSERT_EQ(b.p[2 * kPage + i], 0x5A);
  EXPECT_TRUE(b.intact(0, 2 * kPage));
  EXPECT_TRUE(b.intact(3 * kPage));
}

TEST(MrBacking, AForkChildGetsItsOwnCopy) {
  REQUIRE_WRITE_HOLD();
  AnonBuf b(4);
  ASSERT_TRUE(b.p);
  MrShare s = mr_share_acquire(b.addr(), b.len);
  ASSERT_GE(s.fd, 0);
  int to_child[2], to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(20);
    char c = 0;
    // Child: private pages with the parent's bytes; its store stays its own.
    int rc = shared_bytes(b.addr(), b.addr(b.len), s.ino) == 0 && b.intact() ? 0 : 1;
    b.p[10] = 0x11;
    if (write(to_parent[1], &c, 1) != 1 || read(to_child[0], &c, 1) != 1) _exit(2);
    if (b.p[20] != uint8_t(20 * 7 + 3)) rc |= 4;  // the parent's later store is not seen
    _exit(rc);
  }
  char c = 0;
  ASSERT_EQ(read(to_parent[0], &c, 1), 1);
  EXPECT_EQ(b.p[10], uint8_t(10 * 7 + 3));
  b.p[20] = 0x22;
  ASSERT_EQ(write(to_child[1], &c, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  // The parent still shares its pages.
  EXPECT_EQ(shared_bytes(b.addr(), b.addr(b.len), s.ino), b.len);
  mr_share_release(s);
  for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) close(fd);
}

// A process whose mremap drops MREMAP_FIXED's address (UCX's hooks) still
// gets the region's own pages shared: before, the memfd landed on the decoy
// address, the program kept private pages, and a peer's RDMA WRITE went to
// memory the program never saw (UCX's active messages arrived as zeros).
TEST(MrBacking, SharingDoesNotGoThroughAHookedMremap) {
  REQUIRE_WRITE_HOLD();
  AnonBuf b(4);
  ASSERT_TRUE(b.p);
  void* decoy = mmap(nullptr, b.len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(decoy, MAP_FAILED);
  g_mremap_decoy = decoy;
  MrShare s = mr_share_acquire(b.addr(), b.len);
  g_mremap_decoy = nullptr;
  ASSERT_GE(s.fd, 0);
  // Expect: the program's pages are the memfd, and a peer's store is seen.
  EXPECT_EQ(shared_bytes(b.addr(), b.addr(b.len), s.ino), b.len);
  EXPECT_TRUE(b.intact());
  uint8_t* peer = map_backing(s, b.len);
  ASSERT_TRUE(peer);
  peer[kPage + 1] = 0x77;
  EXPECT_EQ(b.p[kPage + 1], 0x77);
  munmap(peer, b.len);
  // Making them private again does not go through it either.
  g_mremap_decoy = decoy;
  mr_share_release(s);
  g_mremap_decoy = nullptr;
  EXPECT_EQ(shared_bytes(b.addr(), b.addr(b.len), s.ino), 0u);
  EXPECT_EQ(b.p[kPage + 1], 0x77);
  EXPECT_TRUE(b.intact(0, kPage + 1));
  EXPECT_TRUE(b.intact(kPage + 2));
  munmap(decoy, b.len);
}

// Another thread's stores into a region's pages while it is registered and
// deregistered are kept: the copy and the move happen while writes are held.
// Before, a store between the copy and the move went to the pages being
// replaced and was lost (Open MPI over UCX: UCX registers whole pages, which
// hold malloc's bookkeeping that other threads update, and glibc aborted with
// "corrupted double-linked list").
TEST(MrBacking, AnotherThreadsStoresDuringTheMoveAreKept) {
  REQUIRE_WRITE_HOLD();
  AnonBuf b(256);  // 1 MiB: a copy long enough to be written into
  ASSERT_TRUE(b.p);
  auto* counter = reinterpret_cast<volatile uint64_t*>(b.p + 3 * kPage + 8);
  *counter = 0;
  std::atomic<bool> stop{false};
  uint64_t done = 0;
  std::thread writer([&] {
    uint64_t n = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      *counter = *counter + 1;
      ++n;
    }
    done = n;
  });
  int shared = 0;
  for (int i = 0; i < 300; ++i) {
    MrShare s = mr_share_acquire(b.addr(), b.len);
    shared += s.fd >= 0;
    mr_share_release(s);
  }
  stop = true;
  writer.join();
  EXPECT_EQ(shared, 300);
  EXPECT_GT(done, 0u);
  EXPECT_EQ(*counter, done) << "stores lost during the moves";
}

// The same for the kernel writing on another process's behalf
// (process_vm_writev, as UCX's and Open MPI's CMA transports and uroce's own
// fallback do): a child adds one to a word of ours through
// process_vm_readv/writev while we register and deregister the pages.
TEST(MrBacking, AnotherProcesssWritesDuringTheMoveAreKept) {
  REQUIRE_WRITE_HOLD();
  AnonBuf b(256);
  ASSERT_TRUE(b.p);
  auto* counter = reinterpret_cast<volatile uint64_t*>(b.p + 7 * kPage + 16);
  *counter = 0;
  int stop_pipe[2], count_pipe[2];
  ASSERT_EQ(pipe(stop_pipe), 0);
  ASSERT_EQ(pipe(count_pipe), 0);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(60);
    fcntl(stop_pipe[0], F_SETFL, O_NONBLOCK);
    uint64_t n = 0;
    char c;
    while (read(stop_pipe[0], &c, 1) != 1) {
      uint64_t v = 0;
      iovec local{&v, sizeof(v)}, remote{const_cast<uint64_t*>(counter), sizeof(v)};
      if (process_vm_readv(parent, &local, 1, &remote, 1, 0) != sizeof(v)) _exit(3);
      ++v;
      if (process_vm_writev(parent, &local, 1, &remote, 1, 0) != sizeof(v)) _exit(4);
      ++n;
    }
    _exit(write(count_pipe[1], &n, sizeof(n)) == sizeof(n) ? 0 : 5);
  }
  int shared = 0;
  for (int i = 0; i < 300; ++i) {
    MrShare s = mr_share_acquire(b.addr(), b.len);
    shared += s.fd >= 0;
    mr_share_release(s);
  }
  ASSERT_EQ(write(stop_pipe[1], "x", 1), 1);
  uint64_t done = 0;
  EXPECT_EQ(read(count_pipe[0], &done, sizeof(done)), ssize_t(sizeof(done)));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  EXPECT_EQ(shared, 300);
  EXPECT_GT(done, 0u);
  EXPECT_EQ(*counter, done) << "writes lost during the moves";
  for (int fd : {stop_pipe[0], stop_pipe[1], count_pipe[0], count_pipe[1]}) close(fd);
}

}  // namespace
}  // namespace uroce::core
