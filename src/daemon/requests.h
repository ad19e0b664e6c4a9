// uroced's answers to its clients' requests (contract/control_protocol.h), apart
// from the socket loop (uroced_main.cc) so that a fuzzer can drive them with
// any bytes and any descriptors (tests/fuzz/control_fuzz.cc).
//
// Nothing a client sends is trusted: a message of the wrong size ends the
// connection; numbers are checked against the registry; a passed descriptor
// must be of the kind the request names (a sealed memfd for a context, a
// connected UDP socket for a linger) or it is closed and the request fails.
// Each client has limits (kLimits*): beyond them a request fails with
// ENOMEM (what this client may hold, as a device's max_qp) or EAGAIN (what
// the whole daemon may hold, as the kernel's rdma cgroup answers).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "contract/control_protocol.h"
#include "contract/device_info.h"
#include "daemon/linger.h"
#include "daemon/registry.h"
#include "daemon/xdp_ports.h"

namespace uroce::daemon {

/// How much one client, and all of them together, may make uroced hold.
struct ClientLimits {
  uint32_t connections_per_pid = 64;  // a process needs one (one more per fork)
  uint32_t connections = 4096;
  uint32_t lingers = 4096;  // destroyed QPs' sockets kept for a few seconds
};

class Requests {
 public:
  struct Hooks {
    std::function<std::vector<core::DeviceInfo>()> devices;
    /// A descriptor for a kIdWatch reply (the caller's to close), or -1.
    std::function<int()> id_watch_fd;
    /// A descriptor uroced must now wait on (a linger's socket).
    std::function<void(int fd)> watch;
    /// The AF_XDP link's interfaces (none: kXskOpen answers EOPNOTSUPP).
    XdpPorts* xdp = nullptr;
  };
  Requests(int host_shm_fd, Hooks hooks, ClientLimits limits = {});

  /// A connection accepted from process `pid`. `trusted`: of this daemon's
  /// user (daemon/peer_check.h). False: the connection is over a limit and
  /// must be closed now.
  bool open(int fd, pid_t pid, bool trusted);
  /// The connection closed (or is dropped): everything its process held goes.
  void close(int fd);

  struct Answer {
    std::unique_ptr<control::Reply> reply;
    size_t len = 0;
    int fd = -1;            // to pass with the reply
    bool close_fd = false;  // `fd` was made for this reply
    bool drop = false;      // end the connection after sending (or instead, if no reply)
    bool send = true;
  };
  /// One message of `len` bytes from connection `fd`, with `passed` (-1:
  /// none), which this call owns from now on.
  Answer handle(int fd, const void* msg, size_t len, int passed);

  /// The process of connection `fd`, if it is one of this daemon's user's
  /// (0 otherwise, or for no such connection).
  pid_t trusted_pid(int fd) const {
    auto it = clients_.find(fd);
    return it == clients_.end() || it->second.refused ? 0 : it->second.pid;
  }

  Registry& registry() { return registry_; }
  Lingers& lingers() { return lingers_; }
  size_t num_clients() const { return clients_.size(); }
  bool empty() const { return clients_.empty(); }

 private:
  /// kAllocQpn's batch (also asked with kRegisterCtx) into `reply`.
  void alloc_qpns(int fd, const control::Request& req, uint32_t ctx_id, control::Reply* reply);
  struct Client {
    pid_t pid = 0;
    bool refused = false;  // another user's process
  };
  void linger(const control::Request& req, int passed);
  /// kRawRule (a RawRuleRequest).
  Answer raw_rule(int fd, const control::RawRuleRequest& m);

  int host_shm_fd_;
  Hooks hooks_;
  ClientLimits limits_;
  std::map<int, Client> clients_;
  std::map<pid_t, uint32_t> per_pid_;
  Registry registry_;
  Lingers lingers_;
};

}  // namespace uroce::daemon
