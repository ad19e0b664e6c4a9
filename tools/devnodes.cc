// uroce devnodes [--remove] [--dir DIR] [DEVICE...]
//
// UCX uses an RDMA device only if /dev/infiniband/<its dev_name> exists as a
// character device the user may read and write: it checks with stat() and
// access() and never opens it (UCX 1.13, uct_ib_device_is_accessible). The
// kernel makes these nodes for its devices (uverbs<N>); uroce's devices are
// not the kernel's, so nothing does. This command makes, for uroce's
// devices, /dev/infiniband/<dev_name> as a symbolic link to /dev/null: a
// character device every user may read and write, so UCX takes the device,
// and harmless if something opens it (uroce's libibverbs never does).
//
// Which devices: those named; else every device of a network interface, and
// uroce_lo only when it is the only device. uroce_lo's GIDs (127.0.0.1, ::1)
// exist on every host, and UCX counts any two RoCE v2 addresses of one family
// as reachable (UCX_IB_ROCE_LOCAL_SUBNET=n, its default): with uroce_lo in
// use, a process on another host looks reachable through it, and what UCX
// sends that way stays on this host. On one host every device reaches every
// process of the host (uroce's intra-host link), so uroce_lo is not needed
// where another device exists.
//
// An entry that is there already and is not such a link (a real RDMA
// device's node) is left alone. --remove takes away, for the named devices
// (all of uroce's when none are named), the links to /dev/null, and the
// directory if that leaves it empty.
#include "tools/devnodes.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include "contract/control_client.h"

namespace uroce::tools {
namespace {

constexpr const char* kTarget = "/dev/null";

/// What UCX accepts: a character device this user may read and write.
bool ucx_accepts(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode) && access(path.c_str(), R_OK | W_OK) == 0;
}

/// A link this command made.
bool is_our_link(const std::string& path) {
  char to[PATH_MAX];
  const ssize_t n = readlink(path.c_str(), to, sizeof(to) - 1);
  if (n < 0) return false;
  to[n] = '\0';
  return strcmp(to, kTarget) == 0;
}

}  // namespace

int devnodes(const DevnodesOptions& o) {
  auto cc = core::ControlClient::get();
  if (!cc.is_ok()) {
    fprintf(stderr, "uroce devnodes: cannot reach uroced: %s\n", strerror(cc.err()));
    return 1;
  }
  const std::vector<core::DeviceInfo>& devs = cc.value()->devices();
  std::vector<bool> chosen(devs.size(), false);
  if (!o.devices.empty()) {
    for (const std::string& name : o.devices) {
      bool found = false;
      for (size_t i = 0; i < devs.size(); ++i)
        if (name == devs[i].name) chosen[i] = found = true;
      if (!found) {
        fprintf(stderr, "uroce devnodes: no device %s (uroce's are:", name.c_str());
        for (const core::DeviceInfo& d : devs) fprintf(stderr, " %s", d.name);
        fprintf(stderr, ")\n");
        return 1;
      }
    }
  } else {
    for (size_t i = 0; i < devs.size(); ++i) chosen[i] = o.remove || !devs[i].is_loopback || devs.size() == 1;
  }

  if (!o.remove && mkdir(o.dir.c_str(), 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "uroce devnodes: cannot create %s: %s\n", o.dir.c_str(), strerror(errno));
    return 1;
  }
  int status = 0;
  for (size_t i = 0; i < devs.size(); ++i) {
    if (!chosen[i]) continue;
    char name[64];
    core::verbs_dev_name(uint32_t(i), name, sizeof(name));
    const std::string path = o.dir + "/" + name;
    struct stat st {};
    const bool exists = lstat(path.c_str(), &st) == 0;
    if (o.remove) {
      if (!exists || !is_our_link(path)) continue;
      if (unlink(path.c_str()) != 0) {
        fprintf(stderr, "uroce devnodes: cannot remove %s: %s\n", path.c_str(), strerror(errno));
        status = 1;
        continue;
      }
      printf("%s: removed (%s)\n", path.c_str(), devs[i].name);
      continue;
    }
    if (!exists) {
      if (symlink(kTarget, path.c_str()) != 0) {
        fprintf(stderr, "uroce devnodes: cannot create %s: %s\n", path.c_str(), strerror(errno));
        status = 1;
        continue;
      }
      printf("%s -> %s: created (%s)\n", path.c_str(), kTarget, devs[i].name);
    } else if (is_our_link(path)) {
      printf("%s -> %s: there already (%s)\n", path.c_str(), kTarget, devs[i].name);
    } else {
      printf("%s: left alone, it is not a link this command makes (another RDMA device's node?) (%s)\n",
             path.c_str(), devs[i].name);
    }
    if (!ucx_accepts(path)) {
      fprintf(stderr,
              "uroce devnodes: %s is no character device this user may read and write: UCX will not use %s\n",
              path.c_str(), devs[i].name);
      status = 1;
    }
  }
  if (o.remove) (void)rmdir(o.dir.c_str());  // only if empty
  return status;
}

}  // namespace uroce::tools
