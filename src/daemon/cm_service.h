// uroced's connection manager (core/cm_protocol.h): the ids of every client
// process, their bindings and listeners, and the pairing of a connecting id
// with a listener's new id between processes of this host.
//
// What the kernel's CM does for a process, this does for a client: a port
// taken by one id is refused to another (EADDRINUSE); a connect to an
// address of this host with no listener is REJECTED (reason 8, invalid
// service ID; after 50 ms, in case the listener comes: see connect()), one to
// an address of no device here is UNREACHABLE (the wire
// CM is not built yet); when a client goes, the peers of its ids are told
// (DISCONNECTED once connected, REJECTED while connecting) and its ports are
// free again.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <set>
#include <utility>

#include "core/cm_protocol.h"

namespace uroce::daemon {

class CmService {
 public:
  /// want_write(fd, on): uroced must (or need no longer) wake when fd can
  /// take more (a client slow to read its events).
  explicit CmService(std::function<void(int fd, bool on)> want_write);

  bool owns(int fd) const { return conns_.count(fd) != 0; }
  /// `fd` sent kCmOpen as its first message: from now on it is a CM
  /// connection. Answers the open.
  void adopt(int fd, pid_t pid, const cmproto::Msg& open);
  /// One message of `len` bytes arrived on `fd` (at `now_ns`, CLOCK_MONOTONIC).
  void on_message(int fd, const void* msg, size_t len, uint64_t now_ns);
  /// Rejects the requests that waited for a listener until `now_ns`.
  void expire(uint64_t now_ns);
  /// Whether requests wait for a listener (the caller looks again soon).
  bool waiting() const { return !pending_.empty(); }
  /// `fd` can take more: sends what waited.
  void on_writable(int fd);
  /// The clients to drop now (a malformed message, a socket that failed or
  /// too many events waiting), this one's or another's: the caller closes
  /// them (and calls close()).
  std::set<int> take_drops() { return std::exchange(drops_, {}); }
  /// The client is gone: its ids go, and their peers hear of it.
  void close(int fd);

  size_t num_ids() const { return ids_.size(); }

 private:
  enum class State : uint8_t {
    kIdle,
    kBound,
    kListening,
    kConnecting,
    kRequested,
    kAccepted,
    kConnected,
    kGone
  };
  struct Id {
    int conn;  // the client connection that owns it
    uint32_t ps;
    State state = State::kIdle;
    uint8_t addr[28] = {};  // bound address (listener: what it listens on)
    bool bound = false;
    uint64_t peer = 0;  // the id at the other end (connecting or connected)
  };
  struct Conn {
    pid_t pid;
    std::deque<cmproto::Msg> out;  // events the socket could not take yet
    std::set<uint64_t> ids;
  };

  void reply(int fd, const cmproto::Msg& req, int status, const cmproto::Msg* body = nullptr);
  bool send(int fd, const cmproto::Msg& m);
  void event(uint64_t handle, uint32_t type, int status, const cmproto::Msg* body = nullptr);
  int bind(Id& id, uint64_t handle, uint8_t* addr);
  uint64_t find_listener(uint32_t ps, const uint8_t* dst) const;
  void connect(int fd, const cmproto::Msg& m, uint64_t now_ns);
  /// Hands a connect request to its listener. False: there is none.
  bool deliver(const cmproto::Msg& m);
  /// Ends `handle`'s link to its peer; tells the peer with `peer_event`.
  void unlink(uint64_t handle, uint32_t peer_event, int status);
  void destroy(uint64_t handle);

  std::function<void(int, bool)> want_write_;
  std::map<int, Conn> conns_;
  std::map<uint64_t, Id> ids_;
  uint64_t next_handle_ = 1;
  std::set<int> drops_;
  struct Pending {
    cmproto::Msg req;
    uint64_t deadline_ns;
  };
  std::list<Pending> pending_;  // connect requests that came before their listener
};

}  // namespace uroce::daemon
