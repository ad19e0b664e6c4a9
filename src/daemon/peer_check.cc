#include "daemon/peer_check.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

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

long trusted_gid_from_env() {
  const char* s = getenv("UROCED_TRUST_GID");
  if (!s || !*s) return -1;
  char* end = nullptr;
  const long g = strtol(s, &end, 10);
  return (*end == '\0' && g >= 0) ? g : -1;
}

}  // namespace uroce::daemon
