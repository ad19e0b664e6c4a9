// rsockets: librdmacm's socket-like API (rdma/rsocket.h), which Debian's
// librspreload.so maps a program's socket calls onto. Stream sockets only;
// rsocket(SOCK_DGRAM) fails with ENOTSUP (librspreload then gives the program
// a kernel UDP socket).
//
// Built on the public librdmacm and verbs API, and speaking rdma-core's
// rsocket protocol, so a uroce rsocket talks to one on a kernel RoCE host:
//  - connect/accept carry a 40-byte ConnData in the CM private data (version
//    1; all fields big-endian): how many messages the peer may send before
//    waiting for credits, where its credit updates go (an array of two
//    WireSge, followed by the iomap table), and the first half of the
//    receive buffer.
//  - data moves by RDMA WRITE WITH IMMEDIATE into the receiver's ring buffer;
//    the immediate says what happened: op in its top 3 bits (Op), the byte
//    count, credit sequence number or control code in the rest.
//  - the receiver hands buffer back half a ring at a time: it writes the
//    freed half's WireSge into the sender's array (alternating slots) with an
//    immediate kSgl carrying the new message limit; a kSgl with no data only
//    moves the limit.
//  - riowrite writes straight into a buffer the peer published with riomap
//    (an IomapEntry written into this side's iomap table, immediate
//    kIomapSgl).
//
// Every rsocket owns a CM event channel; its fd is the socket's number (so
// the numbers never collide with the program's descriptors, which matters to
// librspreload, and a blocked call sleeps in poll() on it and on the CQ's
// completion channel).
#pragma once

#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/uio.h>

#include <cstdint>
#include <mutex>
#include <vector>

namespace uroce::rdmacm::rs {

/// rdma-core's struct rs_sge: where the peer may write.
struct WireSge {
  uint64_t addr;
  uint32_t key;
  uint32_t length;
};
static_assert(sizeof(WireSge) == 16);

/// The private data of the connection request and reply (rs_conn_data).
struct ConnData {
  uint8_t version;   // 1
  uint8_t flags;     // kConnFlag*
  uint16_t credits;  // big-endian: receive queue size
  uint8_t reserved[3];
  uint8_t iomap_scale;  // the iomap table's size (scaled, see scale_to_value)
  WireSge target_sgl;   // big-endian: the credit array (length: entries)
  WireSge data_buf;     // big-endian: the first half of the receive ring
};
static_assert(sizeof(ConnData) == 40);
constexpr uint8_t kConnFlagNet = 1;    // the sender's SGEs are big-endian
constexpr uint8_t kConnFlagIomap = 2;  // an iomap table follows the array

/// One published riomap buffer (rs_iomap).
struct IomapEntry {
  uint64_t offset;
  WireSge sge;
};
static_assert(sizeof(IomapEntry) == 24);

/// The immediate's op (bits 31..29).
enum Op : uint32_t { kOpData = 0, kOpWrite = 2, kOpSgl = 4, kOpIomapSgl = 6, kOpCtrl = 7 };
/// kOpCtrl's codes.
enum Ctrl : uint32_t { kCtrlDisconnect = 0, kCtrlKeepalive = 1, kCtrlShutdown = 2 };
constexpr uint32_t imm_of(uint32_t op, uint32_t data) { return op << 29 | data; }
constexpr uint32_t op_of(uint32_t imm) { return imm >> 29; }
constexpr uint32_t data_of(uint32_t imm) { return imm & 0x1fffffff; }

constexpr uint32_t kSendLowWater = 2048;  // RS_SNDLOWAT: a send needs this much room
constexpr uint32_t kFirstXfer = 2048;     // a long send starts with this, doubling
constexpr uint32_t kMaxXfer = 65536;      // ... up to this per WRITE
constexpr uint32_t kCtrlSlots = 4;        // control messages in flight
constexpr uint32_t kSglSize = 2;          // entries in the credit array
constexpr uint16_t kQpMin = 16, kQpMax = 0xfffe;
constexpr uint64_t kRecvFlag = uint64_t(1) << 63;  // wr_id of a receive

/// State bits, as rdma-core's: kConnected stays set while the connection
/// exists; each half of it is kReadable, kWritable.
enum State : uint32_t {
  kInit = 0,
  kBound = 0x1,
  kListening = 0x2,
  kOpening = 0x4,  // resolving, connecting or accepting (see Opening)
  kConnected = 0x100,
  kWritable = 0x200,
  kReadable = 0x400,
  kConnectRdwr = kConnected | kWritable | kReadable,
  kConnectError = 0x800,
  kDisconnected = 0x1000,
  kError = 0x2000,
};
enum class Opening : uint8_t { kNone, kAddr, kRoute, kConnect, kAccept };

struct IoMap {
  uint64_t offset;
  ibv_mr* mr;
  int index;  // slot in the peer's iomap table; -1: local only
  bool sent;
};

struct Rsocket {
  int index = -1;  // the channel's fd
  int domain = 0;
  std::mutex mu;  // everything below
  rdma_event_channel* ch = nullptr;
  rdma_cm_id* id = nullptr;
  uint32_t state = kInit;
  Opening opening = Opening::kNone;
  int err = 0;  // SO_ERROR
  int fs_flags = 0, fd_flags = 0;

  // Options (set before connecting).
  uint32_t sbuf_size = 1 << 17, rbuf_size = 1 << 17;
  uint16_t sq_size = 384, rq_size = 384, sq_inline = 64;
  uint16_t iomap_size = 0;  // this side's table
  uint64_t so_opts = 0, tcp_opts = 0, ipv6_opts = 0;
  int ip_tos = 0, keepalive_time = 0;

  // Verbs objects.
  ibv_comp_channel* cch = nullptr;
  ibv_cq* cq = nullptr;
  bool armed = false;

  // Sending.
  uint8_t* sbuf = nullptr;  // sbuf_size, then kCtrlSlots control messages
  ibv_mr* smr = nullptr;
  uint32_t spos = 0;        // where the next copy goes
  uint32_t sbuf_avail = 0;  // bytes of sbuf (or inline budget) not in flight
  uint8_t* tbuf = nullptr;  // credit array, then the iomap table: the peer writes here
  size_t tbuf_len = 0;
  ibv_mr* tmr = nullptr;
  int target_sge = 0;                   // the credit array's entry being filled
  uint16_t sseq_no = 0, sseq_comp = 0;  // messages sent, limit
  int sqe_avail = 0;
  uint32_t ctrl_seqno = 0, ctrl_max_seqno = kCtrlSlots;
  WireSge remote_sgl{};    // the peer's credit array
  int remote_sge = 0;      // its next entry
  WireSge remote_iomap{};  // the peer's iomap table
  bool swap_sgl = false;   // the peer's SGEs are in the other byte order

  // Receiving.
  uint8_t* rbuf = nullptr;
  ibv_mr* rmr = nullptr;
  uint32_t rbuf_offset = 0, rbuf_avail = 0, rbuf_free_offset = 0;
  std::vector<uint32_t> rmsg;  // lengths of arrived data, a ring of rq_size + 1
  uint32_t rmsg_head = 0, rmsg_tail = 0;
  uint16_t rseq_no = 0, rseq_comp = 0;

  std::vector<IoMap> iomaps;
  bool iomap_pending = false;

  WireSge* target_sgl() { return reinterpret_cast<WireSge*>(tbuf); }
  IomapEntry* target_iomap() { return reinterpret_cast<IomapEntry*>(tbuf + kSglSize * sizeof(WireSge)); }
  bool connected() const { return state & kConnected; }
};

// rsocket.cc
/// The rsocket numbered `fd`, or nullptr.
Rsocket* lookup(int fd);
/// Drives a connect or accept on (nonblocking or not). 0: connected; -1 with
/// errno (EINPROGRESS: still opening).
int progress_open(Rsocket* rs, std::unique_lock<std::mutex>& lk, bool nonblock);
/// Reads the CM events queued for a connected socket (a peer's disconnect).
void drain_cm(Rsocket* rs);

// rsocket_data.cc
/// QP, CQ and buffers for a socket whose id has a device. 0 or -1/errno.
int create_ep(Rsocket* rs);
void destroy_ep(Rsocket* rs);
void format_conn(Rsocket* rs, ConnData* c);
void save_conn(Rsocket* rs, const ConnData& c);
/// Polls the CQ and sends credits if due.
void progress_cq(Rsocket* rs);
bool have_rdata(Rsocket* rs);
bool can_send(Rsocket* rs);
bool all_sends_done(Rsocket* rs);
/// Posts a control message (waits for a control slot). 0 or -1/errno.
int send_ctrl(Rsocket* rs, std::unique_lock<std::mutex>& lk, uint32_t code);
ssize_t send_iov(Rsocket* rs, const iovec* iov, int iovcnt, int flags);
ssize_t recv_iov(Rsocket* rs, const iovec* iov, int iovcnt, int flags);
/// riowrite: plain WRITEs into the peer's published buffers.
ssize_t write_iomap(Rsocket* rs, const void* buf, size_t count, uint64_t offset, int flags);

// rsocket_poll.cc
/// Waits until test(rs) holds, progressing the socket meanwhile (polling its
/// CQ, reading its CM events). 0, or -1 with errno (EWOULDBLOCK when
/// nonblocking). mu held on entry and exit; released while sleeping.
int wait_until(Rsocket* rs, std::unique_lock<std::mutex>& lk, bool nonblock, bool (*test)(Rsocket*));
/// What poll() would report for the socket now (progressing it first).
short revents_of(Rsocket* rs, std::unique_lock<std::mutex>& lk, short events);

}  // namespace uroce::rdmacm::rs
