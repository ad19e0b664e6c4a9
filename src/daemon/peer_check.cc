#include "daemon/peer_check.h"

#include <linux/capability.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77  // Linux 6.5 (Debian 12's headers predate it)
#endif

namespace uroce::daemon {

PeerCheck check_peer(int fd, long trusted_gid) {
  PeerCheck p;
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof(cred)) return p;
  p.pid = cred.pid;
  p.uid = cred.uid;
  p.gid = cred.gid;
  if (cred.uid == geteuid()) {
    p.trusted = true;
    return p;
  }
  if (trusted_gid < 0) return p;
  if (cred.gid == gid_t(trusted_gid)) {
    p.trusted = true;
    return p;
  }
  // The peer's supplementary groups as they were when it connected.
  gid_t groups[256];
  socklen_t glen = sizeof(groups);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) == 0)
    for (size_t i = 0; i < glen / sizeof(gid_t); ++i)
      if (groups[i] == gid_t(trusted_gid)) p.trusted = true;
  return p;
}

namespace {

std::string read_small(const char* path) {
  std::string out;
  if (FILE* f = fopen(path, "re")) {
    char buf[512];
    size_t n;
    while (out.size() < 4096 && (n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
    fclose(f);
  }
  return out;
}

/// Whether process `pid` is in this process's user namespace. Its
/// /proc/<pid>/ns/user names the namespace, but needs ptrace access, which
/// a client that gained capabilities from a file (setcap: not dumpable)
/// does not give a uroced without CAP_SYS_PTRACE; then what its namespace
/// maps, as seen from here, tells: the same map as this namespace's own,
/// which an unprivileged process cannot give a namespace it makes (it maps
/// its own ID only).
bool in_my_user_ns(pid_t pid) {
  // uroced's own namespace, and its map, are fixed for its life: read once.
  struct Own {
    struct stat ns = {};
    bool have_ns = false;
    std::string uid_map;
  };
  static const Own own = [] {
    Own o;
    o.have_ns = stat("/proc/self/ns/user", &o.ns) == 0;
    o.uid_map = read_small("/proc/self/uid_map");
    return o;
  }();
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/ns/user", int(pid));
  struct stat theirs = {};
  if (own.have_ns && stat(path, &theirs) == 0)
    return own.ns.st_ino == theirs.st_ino && own.ns.st_dev == theirs.st_dev;
  snprintf(path, sizeof(path), "/proc/%d/uid_map", int(pid));
  return !own.uid_map.empty() && own.uid_map == read_small(path);
}

}  // namespace

bool peer_has_net_raw(int fd, pid_t pid) {
  int pidfd = -1;
  socklen_t len = sizeof(pidfd);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) != 0 || len != sizeof(pidfd)) {
    pidfd = int(syscall(SYS_pidfd_open, pid, 0));
    if (pidfd < 0) return false;
  }
  // Capabilities count in uroced's own user namespace, as the kernel's
  // capable() counts them in the initial one: a process that made a user
  // namespace of its own has every capability there, and none here.
  if (!in_my_user_ns(pid)) {
    ::close(pidfd);
    return false;
  }
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/status", int(pid));
  bool has = false;
  if (FILE* f = fopen(path, "re")) {
    char line[256];
    while (fgets(line, sizeof(line), f))
      if (strncmp(line, "CapEff:", 7) == 0) {
        const unsigned long long eff = strtoull(line + 7, nullptr, 16);
        has = (eff >> CAP_NET_RAW) & 1;
        break;
      }
    fclose(f);
  }
  // Still the process the pidfd names: its PID was not reused while /proc was read.
  if (has && syscall(SYS_pidfd_send_signal, pidfd, 0, nullptr, 0) != 0) has = false;
  ::close(pidfd);
  return has;
}

long trusted_gid_from_env() {
  const char* s = getenv("UROCED_TRUST_GID");
  if (!s || !*s) return -1;
  char* end = nullptr;
  const long g = strtol(s, &end, 10);
  return (*end == '\0' && g >= 0) ? g : -1;
}

}  // namespace uroce::daemon
