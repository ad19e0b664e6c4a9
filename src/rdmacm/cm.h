// The drop-in librdmacm.so.1: what its parts share.
//
// Objects: an rdma_cm_id, an rdma_event_channel and an rdma_cm_event are the
// first member of uroce's own structs (CmId, Channel, Event), so the pointer
// an application holds is the pointer to ours. They are filled with uroce's
// verbs objects (id->verbs is one of the contexts rdma_get_devices returns).
//
// Events: a channel is an eventfd in semaphore mode in front of a queue.
// Posting pushes the event and adds one; rdma_get_cm_event reads one (so it
// blocks, or fails with EAGAIN once the program set O_NONBLOCK, and the fd
// polls readable while events are queued, as the kernel's rdma_cm fd does),
// then pops. An id created without a channel gets a private one and its
// calls wait for their own event ("synchronous" ids).
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "contract/cm_protocol.h"

namespace uroce::rdmacm {

struct CmId;

struct Event {
  rdma_cm_event pub;  // first: the program's pointer is ours
  uint8_t private_data[256];
};

struct Channel {
  rdma_event_channel pub;  // first; pub.fd is the eventfd
  std::mutex mu;
  std::deque<Event*> queue;  // guarded by mu
  /// Threads inside rdma_get_cm_event, and whether the program destroyed
  /// the channel meanwhile (guarded by mu): the last reader out frees it.
  int readers = 0;
  bool destroyed = false;
};

enum class IdState : uint8_t {
  kIdle,
  kBound,          // rdma_bind_addr on a device, or on a wildcard address
  kAddrResolved,   // rdma_resolve_addr succeeded
  kRouteResolved,  // rdma_resolve_route succeeded
  kListening,
  kConnecting,  // rdma_connect sent, no answer yet
  kRequested,   // came with CONNECT_REQUEST, not answered yet
  kAccepted,    // rdma_accept sent, no RTU yet
  kResponded,   // CONNECT_RESPONSE given to a program that moves its own QP
  kConnected,
  kDisconnected,
  kDestroying,
};

/// A multicast group an id joined (rdma_join_multicast).
struct Group {
  ibv_gid mgid;
  bool attached;  // its QP receives the group
};

struct CmId {
  rdma_cm_id pub;  // first: the program's pointer is ours

  std::mutex mu;
  std::condition_variable acked;  // events_acked moved
  uint32_t events_reported = 0;   // guarded by mu: events handed to the program
  uint32_t events_acked = 0;      // guarded by mu
  IdState state = IdState::kIdle;
  bool sync = false;                  // owns its channel; calls wait for their event
  bool cqs_ours[2] = {false, false};  // send, recv CQ created by rdma_create_qp
  ibv_sa_path_rec path{};
  int gid_index = 0;       // of the source address in the device's GID table
  uint64_t handle = 0;     // uroced's id (link.h), 0 until needed
  cmproto::Conn own{};     // what this side said in its REQ or REP
  cmproto::Conn remote{};  // what the other side said
  bool has_remote = false;
  bool own_ready = false;  // own.psn and own.mtu chosen (connect.cc)
  bool passive = false;    // came with a CONNECT_REQUEST
  std::vector<Group> groups;
  bool has_qp_init = false;    // a passive rdma_create_ep's QP attributes, for
  ibv_qp_init_attr qp_init{};  // the ids rdma_get_request hands out
  ibv_ece local_ece{}, remote_ece{};
  uint8_t tos = 0;
  uint32_t flow_label = 0;  // the path's: a request from the wire names it (its REQ's)
  bool tos_set = false, reuseaddr = false, afonly = false;
  /// RDMA_OPTION_ID_ACK_TIMEOUT (rdma_set_option(3)): the QP's local ACK
  /// timeout at RTS (rdma_init_qp_attr), instead of the CM's default.
  bool ack_timeout_set = false;
  uint8_t ack_timeout = 0;
};

inline CmId* from(rdma_cm_id* id) { return reinterpret_cast<CmId*>(id); }
inline Channel* from(rdma_event_channel* c) { return reinterpret_cast<Channel*>(c); }
inline Event* from(rdma_cm_event* e) { return reinterpret_cast<Event*>(e); }

// channel.cc
/// Queues an event for `id` on its channel (status: 0 or a negative errno,
/// or a REJ reason for REJECTED).
void post_event(CmId* id, rdma_cm_event_type type, int status);
/// For a synchronous id: waits for the next event on its private channel,
/// keeps it in id->pub.event (acked at the next call), and returns 0 or -1
/// with errno from the event's status.
int sync_wait(CmId* id);
/// Queues a made event on a channel.
void queue_event(rdma_event_channel* ch, Event* e);
/// For a synchronous id, waits for the event its call caused.
inline int settle(CmId* id) { return id->sync ? sync_wait(id) : 0; }

using cmproto::kUdpQkey;

/// Fails a call: errno = err, -1.
inline int fail(int err) {
  errno = err;
  return -1;
}

// qp_attr.cc
/// Copies the program's private data into `c` (false: longer than `max`).
bool copy_private(cmproto::Conn* c, const void* data, uint8_t len, uint8_t max);
/// Chooses this side's first PSN and MTU (and, answering a request, its
/// default RDMA read resources) once per id.
void prepare_own(CmId* id);
/// This side's part of the exchange, from the program's parameters and the
/// CM's QP (if it made one). False: private data too long.
bool own_conn(CmId* id, const rdma_conn_param* p, uint8_t max_private, cmproto::Conn* c);
/// The attributes that move the id's QP to `state` (rdma_init_qp_attr).
/// 0 or an errno (EINVAL: RTR and RTS before the other side answered).
int qp_attr_for(CmId* id, ibv_qp_state state, ibv_qp_attr* a, int* mask);
/// Moves the CM's QP of `id` to RTR and RTS. 0 or an errno.
int ready_qp(CmId* id);
void qp_to_error(CmId* id);

// devices.cc
/// The process's shared context of every device (opened once, kept open),
/// NULL-terminated; nullptr with errno if there is none.
ibv_context** device_contexts(int* num);
/// The shared PD of a shared context (allocated at first use), or nullptr.
ibv_pd* shared_pd(ibv_context* ctx);

// addr.cc
/// Where an IP address of this host lives: the shared context, port and GID
/// index whose GID is that address. ENODEV: local but on no device;
/// EADDRNOTAVAIL: not an address of this host.
int find_device(const sockaddr* ip, ibv_context** ctx, uint8_t* port, int* gid_index);
/// The address family's size of a sockaddr (0 for other families).
socklen_t sockaddr_len(const sockaddr* a);
/// The GID form of an IP address (::ffff:a.b.c.d for IPv4).
void ip_to_gid(const sockaddr* a, ibv_gid* gid);

}  // namespace uroce::rdmacm
