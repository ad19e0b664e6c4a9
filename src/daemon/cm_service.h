// uroced's connection manager (contract/cm_protocol.h): the ids of every client
// process, their bindings and listeners, and the pairing of a connecting id
// with a listener's new id between processes of this host.
//
// What the kernel's CM does for a process, this does for a client: a port
// taken by one id is refused to another (EADDRINUSE); a connect to an
// address of this host with no listener is REJECTED (reason 8, invalid
// service ID; after 50 ms, in case the listener comes: see connect()); one to
// another host's address goes on the wire as the IBTA CM's MADs to QP1
// (cm_wire.cc), and is UNREACHABLE when no QP1 serves its source address
// (-ENETUNREACH) or the other side never answers (-ETIMEDOUT); when a client
// goes, the peers of its ids are told (DISCONNECTED once connected, REJECTED
// while connecting) and its ports are free again.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "contract/cm_protocol.h"
#include "link/ip_addr.h"
#include "wire/cm_mad.h"

namespace uroce::daemon {

/// How long the other side may take to answer, and how often a message is
/// sent before the CM gives up (IBTA 12.7.27, 12.7.28): from
/// UROCE_CM_RESPONSE_TIMEOUT (4.096 us * 2^value; 20 as the kernel's CM)
/// and UROCE_CM_RETRIES (15).
struct CmTiming {
  uint8_t response_timeout = 20;
  uint8_t max_retries = 15;
  static CmTiming from_env();
};

class CmService {
 public:
  /// What the CM needs of uroced: want_write(fd, on): wake (or no longer)
  /// when fd can take more (a client slow to read its events); send_mad: a
  /// MAD to QP1 of `remote` from this host's `local` (false: no QP1 there);
  /// node_guid: the GUID of the device with address `local`.
  struct Hooks {
    std::function<void(int fd, bool on)> want_write;
    std::function<bool(const link::IpAddr& local, const link::IpAddr& remote, std::span<const uint8_t> mad)>
        send_mad;
    std::function<uint64_t(const link::IpAddr& local)> node_guid;
  };
  explicit CmService(Hooks hooks, CmTiming timing = {});

  bool owns(int fd) const { return conns_.count(fd) != 0; }
  /// `fd` sent kCmOpen as its first message: from now on it is a CM
  /// connection. Answers the open.
  void adopt(int fd, pid_t pid, const cmproto::Msg& open);
  /// One message of `len` bytes arrived on `fd` (at `now_ns`, CLOCK_MONOTONIC).
  void on_message(int fd, const void* msg, size_t len, uint64_t now_ns);
  /// A CM MAD from QP1 of `from` to this host's address `to`.
  void on_mad(std::span<const uint8_t> mad, const link::IpAddr& from, const link::IpAddr& to,
              uint64_t now_ns);
  /// Rejects the requests that waited for a listener until `now_ns`;
  /// sends again what the wire did not answer in time, or gives up.
  void expire(uint64_t now_ns);
  /// When expire() has something to do next (UINT64_MAX: nothing).
  uint64_t next_deadline_ns() const;
  /// Whether requests wait for a listener.
  bool waiting() const { return !pending_.empty() || !wire_pending_.empty(); }
  /// `fd` can take more: sends what waited.
  void on_writable(int fd);
  /// The clients to drop now (a malformed message, a socket that failed or
  /// too many events waiting), this one's or another's: the caller closes
  /// them (and calls close()).
  std::set<int> take_drops() { return std::exchange(drops_, {}); }
  /// The client is gone: its ids go, and their peers hear of it.
  void close(int fd);

  size_t num_ids() const { return ids_.size(); }
  /// CM MADs dropped: malformed, unexpected, or for no id.
  uint64_t mads_dropped() const { return mads_dropped_; }

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
  /// The other end of an id is on another host: the CM on the wire.
  struct Remote {
    link::IpAddr local, peer;                        // this host's address, the other's
    uint32_t local_comm_id = 0, remote_comm_id = 0;  // SIDR: request ID in local_comm_id
    uint64_t tid = 0;                                // the MAD transaction of the connection
    uint32_t remote_qpn = 0;
    uint8_t mtu = 0;                 // the REQ's path MTU
    uint8_t peer_timeout = 20;       // how long the other side takes to answer (its CM response timeout)
    uint8_t max_retries = 15;        // sends after the first
    bool answered = false;           // connecting: the REP came
    uint64_t no_listener_until = 0;  // connecting: a REJ "invalid service ID" before this: try again
    std::array<uint8_t, wire::cm::kMadSize>
        last{};  // the last MAD sent (repeated on a timeout or a duplicate)
    bool has_last = false;
    uint64_t deadline_ns = 0;  // 0: no timer
    uint32_t tries_left = 0;
  };
  struct Id {
    int conn;  // the client connection that owns it
    uint32_t ps;
    State state = State::kIdle;
    uint8_t addr[28] = {};  // bound address (listener: what it listens on)
    bool bound = false;
    uint64_t peer = 0;               // the id at the other end (connecting or connected), on this host
    std::unique_ptr<Remote> remote;  // or on another host
    Id(int c, uint32_t p, State s = State::kIdle) : conn(c), ps(p), state(s) {}
  };
  struct Conn {
    pid_t pid;
    std::deque<cmproto::Msg> out;  // events the socket could not take yet
    std::set<uint64_t> ids;
    uint64_t token = 0;      // an event connection's, for its call channel to name
    uint64_t events_of = 0;  // a call channel: its event connection's token
  };
  /// The connection that owns what `fd` asks for: itself, or for a call
  /// channel its event connection (-1: that one is gone).
  int owner_of(int fd) const;

  void reply(int fd, const cmproto::Msg& req, int status, const cmproto::Msg* body = nullptr);
  bool send(int fd, const cmproto::Msg& m);
  void event(uint64_t handle, uint32_t type, int status, const cmproto::Msg* body = nullptr);
  int bind(Id& id, uint64_t handle, uint8_t* addr);
  uint64_t find_listener(uint32_t ps, const uint8_t* dst) const;
  void connect(int fd, const cmproto::Msg& m, uint64_t now_ns);
  /// Hands a connect request to its listener (its answer is due before the
  /// request's give-up time). False: there is none.
  bool deliver(const cmproto::Msg& m, uint64_t now_ns);
  /// The connects of this host whose listener never answered: the client
  /// gives up (UNREACHABLE, -ETIMEDOUT) as one whose REQ on the wire got
  /// no answer, and the listener's id is refused (REJECTED, timeout).
  void expire_unanswered(uint64_t now_ns);
  /// Ends `handle`'s link to its peer; tells the peer with `peer_event`.
  void unlink(uint64_t handle, uint32_t peer_event, int status);
  void destroy(uint64_t handle);

  // cm_wire.cc: the other end on another host.
  /// Sends the REQ (SIDR REQ for a datagram port space) of a connect.
  void wire_connect(uint64_t handle, const cmproto::Msg& m, uint64_t now_ns);
  void wire_accept(uint64_t handle, const cmproto::Msg& m, uint64_t now_ns);
  void wire_reject(uint64_t handle, const cmproto::Msg& m);
  void wire_establish(uint64_t handle);
  /// The id's connection ends from this side (disconnect, or its client is
  /// gone): DREQ when connected, REJ while connecting.
  void wire_end(uint64_t handle, uint64_t now_ns, bool id_stays);
  void wire_expire(uint64_t now_ns);
  /// Sends (and keeps, for a duplicate) a REJ for `handle`'s connection.
  void send_rej(uint64_t handle, uint8_t message_rejected, uint16_t reason);
  /// Sends `mad` for `handle` and keeps it for repeating; with a timer
  /// (`retries` more sends, `timeout` as an exponent) or none.
  void wire_send(uint64_t handle, const std::array<uint8_t, wire::cm::kMadSize>& mad, uint64_t now_ns,
                 bool timer, uint8_t timeout);
  /// A REQ or SIDR REQ; with no listener it waits until `wait_until_ns`
  /// (in wire_pending_) in case one comes, then is refused.
  void on_req(const wire::cm::MadHeader& h, std::span<const uint8_t> mad, const link::IpAddr& from,
              const link::IpAddr& to, uint64_t now_ns, uint64_t wait_until_ns);
  void on_sidr_req(const wire::cm::MadHeader& h, std::span<const uint8_t> mad, const link::IpAddr& from,
                   const link::IpAddr& to, uint64_t now_ns, uint64_t wait_until_ns);
  /// Whether a request from `from` with this comm ID (request ID) waits already.
  bool wire_waiting(const link::IpAddr& from, uint32_t comm) const;
  /// Hands the waiting requests on again (a listener came: `expired`
  /// false; their time is up: true, and those still without one are refused).
  void retry_wire_pending(uint64_t now_ns, bool expired);
  /// The id of this host with local comm ID `comm`, whose peer is `from`
  /// (nullptr: none).
  Id* by_comm(uint32_t comm, const link::IpAddr& from, uint64_t* handle);
  uint32_t new_comm_id();
  /// How long a REQ goes unanswered before the CM gives up: every send
  /// and its wait (cm_wire.cc).
  uint64_t give_up_ns() const;
  /// A REQ or SIDR REQ as it came: its MAD, where from and to, its
  /// transaction and comm ID (SIDR: request ID).
  struct Incoming {
    std::span<const uint8_t> mad;
    const link::IpAddr& from;
    const link::IpAddr& to;
    uint64_t tid;
    uint32_t comm;
  };
  enum class Route { kListener, kWaits, kNoListener, kFull };
  /// Finds the listener of a request (`datagram_req`: a SIDR REQ) from the
  /// service ID and the RDMA CM header; with none it waits in wire_pending_
  /// until `wait_until_ns`. kListener: *req holds the event's addresses, GIDs
  /// (the header's), port space and listener.
  Route route_request(const Incoming& in, uint64_t service_id, const wire::cm::CmaHeader& ch,
                      bool datagram_req, uint64_t now_ns, uint64_t wait_until_ns, cmproto::Msg* req);
  /// A new id for a request from the wire to req.listen_handle, with `remote`.
  uint64_t add_requested(const Incoming& in, const cmproto::Msg& req, std::unique_ptr<Remote> remote);

  Hooks hooks_;
  CmTiming timing_;
  std::map<uint32_t, uint64_t> by_comm_;  // local comm ID -> id
  // (the other host, its comm ID or SIDR request ID) -> the id its request made
  std::map<std::pair<std::array<uint8_t, 16>, uint32_t>, uint64_t> by_request_;
  std::multimap<uint64_t, uint64_t> timers_;      // deadline -> id (stale ones skipped)
  std::multimap<uint64_t, uint64_t> unanswered_;  // give-up time -> connecting id of this host
  uint64_t mads_dropped_ = 0;
  /// Whether an interface of this host has the address (of a sockaddr).
  bool local_address(const uint8_t* a, uint64_t now_ns);
  std::vector<std::array<uint8_t, 16>> local_ips_;
  uint64_t local_ips_at_ = 0;
  /// How long a connect request waits for its listener before it is refused
  /// (connect() says why).
  static constexpr uint64_t kNoListenerWaitNs = 50 * 1000 * 1000;
  /// Ids one client may hold (a listener's requests count to its client).
  static constexpr size_t kMaxIdsPerConn = 65536;
  /// The same for a request sent to another host that answers "nothing
  /// listens" (REJ 8): sent again every kNoListenerRetryNs for this long.
  static constexpr uint64_t kRemoteListenerWaitNs = 250 * 1000 * 1000;
  static constexpr uint64_t kNoListenerRetryNs = 10 * 1000 * 1000;
  std::map<int, Conn> conns_;
  std::map<uint64_t, int> by_token_;  // event connection token -> fd
  std::map<uint64_t, Id> ids_;
  uint64_t next_handle_ = 1;
  std::set<int> drops_;
  struct Pending {
    cmproto::Msg req;
    uint64_t deadline_ns;
  };
  std::list<Pending> pending_;  // connect requests that came before their listener
  struct WirePending {
    std::array<uint8_t, wire::cm::kMadSize> mad;
    link::IpAddr from, to;
    uint32_t comm;  // its comm ID or request ID
    uint64_t deadline_ns;
  };
  std::list<WirePending> wire_pending_;  // the same from the wire
};

}  // namespace uroce::daemon
