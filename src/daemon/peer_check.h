// Who may use a uroced: the processes of its own user (SO_PEERCRED on each
// connection), and those of one group an administrator names
// (UROCED_TRUST_GID). Another user's process must not reach this user's
// queues and memory through the daemon (issue 15): it does RDMA with them
// over the network link, as a process on another host would.
#pragma once

#include <sys/types.h>

#include <string>

namespace uroce::daemon {

struct PeerCheck {
  bool trusted = false;
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

/// Checks the process at the other end of unix socket `fd` against this
/// daemon's effective uid and `trusted_gid` (-1: none).
PeerCheck check_peer(int fd, long trusted_gid);

/// Whether the process at the other end of unix socket `fd` (`pid`, from
/// SO_PEERCRED) holds CAP_NET_RAW in its effective set now, as the kernel's
/// uverbs asks before it makes a RAW_PACKET QP or a flow steering rule
/// (capable(CAP_NET_RAW)): in uroced's own user namespace (a process in a
/// user namespace it made holds every capability there, none here). The
/// process is named by a pidfd (SO_PEERPIDFD,
/// else pidfd_open) and still alive after /proc was read, so a PID reused
/// meanwhile is never the one asked about.
bool peer_has_net_raw(int fd, pid_t pid);

/// UROCED_TRUST_GID: a numeric group id whose members this daemon also
/// serves; -1 when unset or not a number.
long trusted_gid_from_env();

}  // namespace uroce::daemon
