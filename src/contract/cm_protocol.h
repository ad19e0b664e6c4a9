// The connection manager's protocol between librdmacm and uroced: one
// AF_UNIX SEQPACKET connection per process (opened with kCmOpen as its first
// message), fixed-size messages both ways. The library sends requests and
// waits for the reply with the same seq; uroced also sends events unasked
// (seq 0), which the library's reader thread queues on the id's channel.
//
// uroced keeps the state a kernel's CM keeps for a process: its ids, their
// bindings and listeners, and which id is connected to which; when the
// process goes, its peers hear of it (DISCONNECTED, REJECTED). Between
// processes of one host uroced pairs the two ids itself; the QPs then use
// the shared-memory link as any other pair does.
#pragma once

#include <cstdint>

namespace uroce::cmproto {

constexpr uint32_t kVersion = 1;
/// kCmOpen's `event` on a process's second connection, its call channel:
/// requests and their answers only (listen_handle: the token its event
/// connection's open answered with, in `handle`). Its ids belong to the
/// event connection, which gets their events. No answer to a request with
/// seq 0 (the library posts it).
constexpr uint32_t kCallChannel = 1;
constexpr uint32_t kMaxPrivateData = 196;  // the largest private data field of a CM message (REP)

enum class Op : uint32_t {
  kCmOpen = 0x100,  // first message: version -> status
  kCreateId,        // ps -> handle
  kDestroyId,       // handle
  kBind,            // handle, src (port 0: pick one) -> src with its port; EADDRINUSE
  kListen,          // handle, arg = backlog
  kConnect,         // handle, src, dst, sgid, dgid, conn (the client's QP)
  kAccept,          // handle, conn (the server's QP)
  kReject,          // handle, conn.private_data
  kEstablish,       // handle: the client's QP is ready (the RTU)
  kDisconnect,      // handle
  kEvent = 0x200,   // uroced -> library: event on handle
};

/// enum rdma_cm_event_type's values (rdma/rdma_cma.h; the library checks them).
enum EventType : uint32_t {
  kEvConnectRequest = 4,
  kEvConnectResponse = 5,
  kEvUnreachable = 7,
  kEvRejected = 8,
  kEvEstablished = 9,
  kEvDisconnected = 10,
};

/// enum rdma_port_space values of the port spaces whose ids use UD QPs.
constexpr uint32_t kPsIpoib = 0x0002;
constexpr uint32_t kPsUdp = 0x0111;
/// The Q_Key the kernel's CM gives those ids' UD QPs (RDMA_UDP_QKEY).
constexpr uint32_t kUdpQkey = 0x01234567;

/// REJ reasons (IBTA vol. 1, 12.6.7.2) the CM reports as REJECTED's status.
constexpr int kRejTimeout = 1;
constexpr int kRejInvalidServiceId = 8;
constexpr int kRejConsumer = 28;
/// SIDR REP status (IBA 12.11.2): a refused SIDR REQ is UNREACHABLE with it.
constexpr int kSidrNoService = 1;
constexpr int kSidrRejected = 2;

/// What a connecting side says about its QP (the fields of a REQ or REP).
struct Conn {
  uint32_t qpn;
  // The first PSN the sender receives (a REQ's or REP's Starting PSN, as
  // the kernel's CM reads it: the receiver's send queue starts there).
  uint32_t psn;
  uint8_t responder_resources;
  uint8_t initiator_depth;
  uint8_t retry_count;
  uint8_t rnr_retry_count;
  uint8_t flow_control;
  uint8_t srq;
  uint8_t mtu;  // enum ibv_mtu of the sender's port
  uint8_t private_data_len;
  uint8_t private_data[kMaxPrivateData];
};

struct Msg {
  uint32_t op;             // Op
  int32_t status;          // replies: 0 or errno; events: the event's status
  uint64_t seq;            // a request's number, echoed in its reply; 0 on events
  uint64_t handle;         // uroced's id
  uint64_t listen_handle;  // CONNECT_REQUEST: the listener it came to
  uint32_t event;          // enum rdma_cm_event_type
  uint32_t ps;             // enum rdma_port_space
  uint32_t arg;
  uint32_t flow_label;  // CONNECT_REQUEST from the wire: the REQ's primary path's
  uint8_t src[28];      // sockaddr_in or sockaddr_in6, from the receiver's side
  uint8_t dst[28];
  uint8_t sgid[16];  // the receiver's GID, then the peer's
  uint8_t dgid[16];
  Conn conn;
};

}  // namespace uroce::cmproto
