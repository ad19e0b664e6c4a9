// The control protocol between the library and uroced: fixed-size requests and
// replies over an AF_UNIX SEQPACKET socket, fds passed with SCM_RIGHTS.
#pragma once

#include <cstdint>
#include <string>

#include "contract/device_info.h"
#include "wire/flow_key.h"

namespace uroce::control {

constexpr uint32_t kProtoVersion = 3;
/// The most QPNs one kAllocQpn hands out.
constexpr uint32_t kQpnBatchMax = 16;

/// Abstract socket name of this user's uroced in the current network
/// namespace. UROCE_DAEMON_NAME overrides it (tests run isolated daemons).
std::string daemon_socket_name();

enum class MsgType : uint32_t {
  kHello = 1,        // -> HelloReply + fd of the host shared memory
  kRegisterCtx = 2,  // fd: the context segment memfd -> ctx_id
  kUnregisterCtx = 3,
  // ctx_id, off, slot (1: an XRC SRQ's RqRing), arg[0] = n (0: 1), arg[1] =
  // stride: n QPNs for the QPs at off, off + stride, ... -> qpns[0..key)
  // (at least one; fewer than n near the client's limit), qpn = qpns[0]
  kAllocQpn = 4,
  kFreeQpn = 5,   // qpn (posted: no reply)
  kAllocKey = 6,  // ctx_id, slot -> key
  kFreeKey = 7,
  kResolveQpn = 8,  // qpn -> pid, ctx_id, qp_off + fd of the owner's segment
  kPing = 9,
  kOpenXrcd = 10,  // qpn=st_dev, off=st_ino of the XRCD file (0,0: a new private one) -> key=xrcd id
  // fd: a destroyed network RC QP's receive socket; qpn, arg = {dest QPN,
  // expected PSN, MSN, its source port}, slot = 1 for an XRC target QP:
  // uroced re-acknowledges the peer's retransmissions
  // of what was executed for a while (see daemon/linger.h)
  kLinger = 11,
  // -> a read-only fd of uroced's table of IPv4 identifications seen on the
  // wire (link/id_watch.h), or none
  kIdWatch = 12,
  // -> a read-only fd of uroced's directory of the host's QP numbers
  // (contract/qp_directory.h)
  kQpDirectory = 13,
  // -> a memfd with a report of every QP and device uroced serves, with
  // their counters (contract/report.h)
  kReport = 14,
  // The AF_XDP link (daemon/xdp_ports.h), arg[0] = interface index:
  // -> a fresh AF_XDP socket for the interface's queue 0 (EBUSY: another
  // process has it; EPERM: uroced lacks the privileges)
  kXskOpen = 15,
  // the socket is bound: frames for the steered QPs go to it from now on
  kXskReady = 16,
  // qpn, arg[1] = 1: frames for this QP (the client's) go to its socket; 0: to the kernel
  kXskSteer = 17,
  // -> 0 if the client may use raw Ethernet (RAW_PACKET QPs, flow steering
  // rules: CAP_NET_RAW in its effective set, as the kernel asks), EPERM
  kRawAccess = 18,
  // A RawRuleRequest (not a Request): off = the rule's id (the client's),
  // arg[0] = interface index, arg[1] = 1: the frames it matches go to the
  // client's AF_XDP socket there; 0: the rule goes. CAP_NET_RAW (EPERM),
  // the interface's client only (EPERM), at most XdpSteer::kMaxRawRules
  // rules on an interface (ENOSPC)
  kRawRule = 19,
};

struct Request {
  uint32_t type;
  uint32_t version;
  int32_t pid;
  uint32_t ctx_id;
  uint32_t qpn;
  uint32_t slot;
  uint64_t off;
  uint32_t arg[4];
};

/// kRawRule's message: a request and the rule (wire/flow_key.h).
struct RawRuleRequest {
  Request req;
  wire::FlowKey val;
  wire::FlowKey mask;
};

struct Reply {
  int32_t status;  // 0 or errno
  uint32_t ctx_id;
  uint32_t qpn;
  uint32_t key;
  int32_t pid;
  uint32_t num_devices;
  uint64_t off;
  uint32_t qpns[kQpnBatchMax];  // kAllocQpn
  core::DeviceInfo devices[core::kMaxDevices];
};

}  // namespace uroce::control
