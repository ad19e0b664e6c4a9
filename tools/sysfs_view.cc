// The view: /sys/class as it is, through an overlay whose upper layer (a
// tmpfs) adds
//
//   infiniband/<dev>/{board_id,node_guid,...}   (contract/sysfs_attrs.h)
//   infiniband/<dev>/device/net/<ifname> -> /sys/class/net/<ifname>
//
// for each uroce device (the link for a non-loopback one only, below), in a mount namespace that only COMMAND
// and its children see (mounts made private first, so nothing reaches the host's). Root (CAP_SYS_ADMIN) gets
// a mount namespace; anyone else gets a user namespace too, with their own uid and gid mapped to themselves
// (Linux allows an overlay there since 5.11): uroced still serves them as the same user, but a capability
// held in that user namespace counts for nothing with uroced (CAP_NET_RAW for raw QPs: run as root for
// those). The tmpfs is detached once the overlay holds it, and its mount point removed, so nothing is left
// behind.
#include "tools/sysfs_view.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "contract/control_client.h"
#include "contract/sysfs_attrs.h"
#include "tools/command.h"

namespace uroce::tools {

namespace {

bool write_file(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == ssize_t(text.size());
  close(fd);
  return ok;
}

bool make_dirs(const std::string& path) {
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/') continue;
    if (mkdir(path.substr(0, at).c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

/// A mount namespace of this process's own: as root directly, else inside
/// a user namespace that maps this user to itself.
bool enter_namespace(bool* in_userns) {
  *in_userns = false;
  if (unshare(CLONE_NEWNS) == 0) return true;
  if (errno != EPERM) return false;
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return false;
  *in_userns = true;
  return write_file("/proc/self/setgroups", "deny") &&
         write_file("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1") &&
         write_file("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1");
}

}  // namespace

int sysfs_view(const std::vector<std::string>& command) {
  if (command.empty()) return 1;
  std::vector<core::DeviceInfo> devs;
  {
    auto cc = core::ControlClient::get();
    if (!cc.is_ok()) {
      fprintf(stderr, "uroce sysfs: cannot reach uroced: %s\n", strerror(cc.err()));
      return 1;
    }
    devs = cc.value()->devices();
  }
  const std::string top = make_temp_dir("uroce-sysfs-");
  if (top.empty()) return 1;
  bool userns = false;
  if (!enter_namespace(&userns)) {
    fprintf(stderr, "uroce sysfs: no mount namespace: %s (needs CAP_SYS_ADMIN, or user namespaces)\n",
            strerror(errno));
    rmdir(top.c_str());
    return 1;
  }
  auto fail = [&](const char* what) {
    fprintf(stderr, "uroce sysfs: %s: %s\n", what, strerror(errno));
    umount2(top.c_str(), MNT_DETACH);
    rmdir(top.c_str());
    return 1;
  };
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return fail("make mounts private");
  if (mount("uroce-sysfs", top.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0)
    return fail("tmpfs");
  const std::string upper = top + "/upper", work = top + "/work";
  if (!make_dirs(work)) return fail("work directory");
  for (const core::DeviceInfo& d : devs) {
    const std::string dir = upper + "/infiniband/" + d.name;
    if (!make_dirs(dir)) return fail(dir.c_str());
    for (std::string_view a : core::sysfs_attr_names()) {
      std::string v;
      if (core::sysfs_attr(d, a, &v) && !write_file(dir + "/" + std::string(a), v + "\n"))
        return fail("attribute file");
    }
    // A loopback device gets no interface here: the CM reads a bind to
    // 127.0.0.1 or ::1 as the kernel does (no device: docs/cm.md), so a
    // program that found lo's address here and bound it would find no
    // device on its id (rdma-core's test_rdmacm then skips, as it does
    // for a device without an interface).
    if (d.ifname[0] && !d.is_loopback) {
      if (!make_dirs(dir + "/device/net")) return fail("device/net");
      if (symlink((std::string("/sys/class/net/") + d.ifname).c_str(),
                  (dir + "/device/net/" + d.ifname).c_str()))
        return fail("device/net link");
    }
  }
  const std::string opts = "lowerdir=/sys/class,upperdir=" + upper + ",workdir=" + work;
  if (mount("overlay", "/sys/class", "overlay", 0, opts.c_str()) != 0) return fail("overlay on /sys/class");
  // The overlay keeps the tmpfs; its mount point goes.
  umount2(top.c_str(), MNT_DETACH);
  rmdir(top.c_str());
  if (userns)
    fprintf(stderr, "uroce sysfs: in a user namespace of your own (not root): no CAP_NET_RAW for uroced\n");
  std::vector<char*> argv;
  for (const std::string& s : command) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  fprintf(stderr, "uroce sysfs: %s: %s\n", argv[0], strerror(errno));
  return 127;
}

}  // namespace uroce::tools
