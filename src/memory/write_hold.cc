#include "memory/write_hold.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace uroce::core {
namespace {

// Newer than Debian 12's kernel headers; the running kernel decides.
constexpr uint64_t kWpUnpopulated = 1ull << 13;  // UFFD_FEATURE_WP_UNPOPULATED (6.5)
#ifndef MADV_POPULATE_READ
constexpr int MADV_POPULATE_READ = 22;
#endif

/// A userfaultfd whose holds cover the kernel's faults too (no
/// UFFD_USER_MODE_ONLY), or -1.
int open_uffd() {
  int fd = int(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  if (fd >= 0) return fd;
  int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
  if (dev < 0) return -1;
  fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
  close(dev);
  return fd < 0 ? -1 : fd;
}

/// The features this kernel offers (0 if userfaultfd cannot be used).
uint64_t kernel_features() {
  static const uint64_t f = [] {
    int fd = open_uffd();
    if (fd < 0) return uint64_t(0);
    uffdio_api api{};
    api.api = UFFD_API;
    uint64_t got = 0;
    if (ioctl(fd, UFFDIO_API, &api) == 0) got = api.features | UFFD_FEATURE_PAGEFAULT_FLAG_WP;
    close(fd);
    return got;
  }();
  return f;
}

}  // namespace

bool WriteHold::available() { return kernel_features() != 0; }

bool WriteHold::hold(uint64_t addr, uint64_t len, bool shmem) {
  release();
  const uint64_t offered = kernel_features();
  if (offered == 0) return false;
  if (shmem && !(offered & UFFD_FEATURE_WP_HUGETLBFS_SHMEM)) return false;
  const bool unpopulated = offered & kWpUnpopulated;
  int fd = open_uffd();
  if (fd < 0) return false;
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = (shmem ? UFFD_FEATURE_WP_HUGETLBFS_SHMEM : 0) | (unpopulated && !shmem ? kWpUnpopulated : 0);
  uffdio_register reg{};
  reg.range = {addr, len};
  reg.mode = UFFDIO_REGISTER_MODE_WP;
  if (ioctl(fd, UFFDIO_API, &api) != 0 || ioctl(fd, UFFDIO_REGISTER, &reg) != 0 ||
      !(reg.ioctls & (1ull << _UFFDIO_WRITEPROTECT))) {
    close(fd);  // unregisters whatever was registered
    return false;
  }
  // Anonymous pages never touched have no page table entry to protect unless
  // the kernel marks those too; otherwise map them (the zero page) first.
  // Shmem gets markers for every page.
  if (!shmem && !unpopulated) madvise(reinterpret_cast<void*>(addr), len, MADV_POPULATE_READ);
  uffdio_writeprotect wp{};
  wp.range = {addr, len};
  wp.mode = UFFDIO_WRITEPROTECT_MODE_WP;
  if (ioctl(fd, UFFDIO_WRITEPROTECT, &wp) != 0) {
    close(fd);
    return false;
  }
  fd_ = fd;
  addr_ = addr;
  len_ = len;
  return true;
}

void WriteHold::release() {
  if (fd_ < 0) return;
  // Wake the held writers explicitly: close() alone wakes them only when
  // this is the last reference to the file, and a fork() in another thread
  // may have copied it into a child.
  uffdio_range r{addr_, len_};
  ioctl(fd_, UFFDIO_WAKE, &r);
  close(fd_);
  fd_ = -1;
}

}  // namespace uroce::core
