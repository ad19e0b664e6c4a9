// The sysfs helpers libibverbs exports: ibv_get_sysfs_path and
// ibv_read_sysfs_file (IBVERBS_1.0; ibv_devinfo and the real librdmacm use
// them) and ibv_read_ibdev_sysfs_file (IBVERBS_PRIVATE_34).
//
// Every read first asks uroce::verbs::sysfs_virtual_read, so that attributes
// of uroce devices (whose ibdev_path exists only in memory) are answered
// without touching the filesystem. No allocation: paths are built on the
// stack and longer ones fail with ENAMETOOLONG.

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/export.h"
#include "verbs/sysfs_hook.h"

// Declared in rdma-core's driver.h, which is not installed.
UROCE_EXPORT const char* ibv_get_sysfs_path(void);
UROCE_EXPORT int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size);
UROCE_EXPORT int ibv_read_ibdev_sysfs_file(char* buf, size_t size, ibv_device* ibdev, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

namespace {

/// The sysfs mount point, resolved once.
struct SysfsRoot {
  char path[PATH_MAX];

  static SysfsRoot resolve() {
    SysfsRoot root{};
    const char* env = nullptr;
    // Follow the caller's environment only when not running set-uid.
    if (getuid() == geteuid()) env = getenv("SYSFS_PATH");
    if (env == nullptr) env = "/sys";
    snprintf(root.path, sizeof(root.path), "%s", env);
    size_t len = strlen(root.path);
    while (len > 0 && root.path[len - 1] == '/') root.path[--len] = '\0';
    return root;
  }
};

/// Reads the file at path into buf with ibv_read_sysfs_file's contract.
int read_file(const char* path, char* buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  if (size == 0) {  // nothing can be stored; rdma-core reports 0 here too
    close(fd);
    return 0;
  }

  size_t len = 0;
  while (len < size) {
    ssize_t n = read(fd, buf + len, size - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int saved_errno = errno;
      close(fd);
      errno = saved_errno;
      return -1;
    }
    if (n == 0) break;
    len += static_cast<size_t>(n);
  }
  close(fd);

  if (len > 0 && buf[len - 1] == '\n') {
    buf[--len] = '\0';  // sysfs values end in one newline; drop it
  } else if (len < size) {
    buf[len] = '\0';
  } else {
    // The value fills buf with no room for the NUL: fail rather than hand
    // out an unterminated string.
    errno = EOVERFLOW;
    return -1;
  }
  return static_cast<int>(len);
}

/// "<dir>/<file>": asks the uroce hook first, then the filesystem.
int read_sysfs(const char* dir, const char* file, char* buf, size_t size) {
  if (dir == nullptr || file == nullptr || (buf == nullptr && size != 0)) {
    errno = EINVAL;
    return -1;
  }
  char path[PATH_MAX];
  int n = snprintf(path, sizeof(path), "%s/%s", dir, file);
  if (n < 0 || static_cast<size_t>(n) >= sizeof(path)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  int out_len = -1;
  if (uroce::verbs::sysfs_virtual_read(path, buf, size, &out_len)) return out_len;
  return read_file(path, buf, size);
}

}  // namespace

/// The sysfs mount point: $SYSFS_PATH (if not set-uid) without trailing
/// slashes, else "/sys". Resolved on first use; the string lives forever.
UROCE_EXPORT const char* ibv_get_sysfs_path(void) {
  static const SysfsRoot root = SysfsRoot::resolve();
  return root.path;
}

/// Reads "<dir>/<file>" into buf, NUL-terminated, without its trailing
/// newline. Returns the length, or -1 with errno set.
UROCE_EXPORT int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  return read_sysfs(dir, file, buf, size);
}

/// As ibv_read_sysfs_file, for "<ibdev->ibdev_path>/<printf(fmt, ...)>".
/// rdma-core's third parameter is its private struct verbs_sysfs_dev; only
/// its own providers call this export, and never on a uroce device.
UROCE_EXPORT int ibv_read_ibdev_sysfs_file(char* buf, size_t size, ibv_device* ibdev, const char* fmt, ...) {
  if (ibdev == nullptr || fmt == nullptr) {
    errno = EINVAL;
    return -1;
  }
  char file[PATH_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(file, sizeof(file), fmt, ap);
  va_end(ap);
  if (n < 0 || static_cast<size_t>(n) >= sizeof(file)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  return read_sysfs(ibdev->ibdev_path, file, buf, size);
}
