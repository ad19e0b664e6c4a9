// Helpers for multi-process verbs tests (C verbs API only).
//
//  - PeerProcess / Channel: fork a peer process and talk to it over a
//    SOCK_SEQPACKET socketpair. Every wait is bounded; the destructor kills
//    and reaps the child, so an ASSERT that returns early never leaks one.
//  - Seeded data patterns and ShadowedMemory: a registered buffer plus a
//    copy of what it must contain, so a check covers every byte, including
//    the bytes just outside the range an operation targeted.
//  - RAII owners for verbs objects, QP bring-up, bounded CQ polling.
//  - Agent: a child process that owns one QP and executes commands from the
//    test (post, poll, fill, expect, verify), so all assertions stay in the
//    gtest process while the data path really crosses processes.
//
// Children open their own device after fork (ibv_get_device_list +
// ibv_open_device): no verbs object is ever used across fork.
#pragma once

#include <infiniband/verbs.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace uroce::test {

/// Bound for every wait in these tests; far above what any step needs.
constexpr int kWaitMs = 10000;
/// A child that outlives this is wedged: it is killed by SIGALRM.
constexpr unsigned kChildLifetimeS = 60;
constexpr const char* kDeviceName = "uroce_lo";
/// The GID index the tests use: 1 (uroce_lo's RoCE v2 IPv4-mapped
/// ::ffff:127.0.0.1), or UROCE_TEST_GID_INDEX (2: ::1, the IPv6 variants).
uint8_t gid_index();
constexpr uint32_t kQkey = 0x11111111;
constexpr int kRemoteAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// ---------------------------------------------------------------------------
// Processes and channels

/// One end of a message-framed socketpair. Sends never raise SIGPIPE;
/// receives take a timeout and fail on EOF (the peer died).
class Channel {
 public:
  explicit Channel(int fd = -1) : fd_(fd) {}
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  bool send(const void* p, size_t n);
  /// Receives exactly one message of exactly `n` bytes.
  bool recv(void* p, size_t n, int timeout_ms = kWaitMs);
  template <class T>
  bool send_pod(const T& v) {
    return send(&v, sizeof(v));
  }
  template <class T>
  bool recv_pod(T* v, int timeout_ms = kWaitMs) {
    return recv(v, sizeof(*v), timeout_ms);
  }

  int fd() const { return fd_; }
  /// Why the last send/recv failed.
  const std::string& error() const { return error_; }

 private:
  int fd_;
  std::string error_;
};

/// A forked child running `body`. The child gets PDEATHSIG and an alarm so it
/// can never outlive the test; the destructor SIGKILLs and reaps it.
class PeerProcess {
 public:
  /// Forks. The child runs body(channel) and _exit()s with its result
  /// (no atexit handlers, no gtest teardown in the child).
  static std::unique_ptr<PeerProcess> spawn(std::function<int(Channel&)> body);
  ~PeerProcess();

  pid_t pid() const { return pid_; }
  Channel& chan() { return chan_; }
  /// Waits (bounded) for the exit; returns the exit code, 128+signal if
  /// killed, or -1 on timeout.
  int wait_exit(int timeout_ms = kWaitMs);
  /// SIGSTOP and wait (bounded) until the kernel reports it stopped.
  bool stop(int timeout_ms = kWaitMs);
  bool cont();
  /// True if /proc says the process is stopped (state T).
  bool is_stopped() const;
  /// SIGKILL + reap now (idempotent).
  void kill_and_reap();

 private:
  PeerProcess(pid_t pid, int fd) : pid_(pid), chan_(fd) {}
  pid_t pid_;
  bool reaped_ = false;
  int exit_code_ = -1;
  Channel chan_;
};

/// Child side: prints a diagnostic to stderr and exits the child.
[[noreturn]] void child_fail(const char* file, int line, const std::string& what);
#define CHILD_CHECK(cond, what)                                         \
  do {                                                                  \
    if (!(cond)) ::uroce::test::child_fail(__FILE__, __LINE__, (what)); \
  } while (0)

// ---------------------------------------------------------------------------
// Data patterns and buffers

/// Byte `pos` of the pattern named `seed`: a pure function, so any sub-range
/// can be produced or checked on its own.
uint8_t pattern_byte(uint32_t seed, uint64_t pos);
/// Writes pattern bytes [pos, pos+n) of `seed` to p.
void fill_pattern(void* p, size_t n, uint32_t seed, uint64_t pos = 0);
/// Index of the first byte of p[0..n) that differs from pattern [pos, pos+n), or -1.
int64_t find_pattern_mismatch(const void* p, size_t n, uint32_t seed, uint64_t pos = 0);

/// A page-aligned anonymous mapping plus a shadow of its expected content.
class ShadowedMemory {
 public:
  ShadowedMemory() = default;
  ~ShadowedMemory();
  ShadowedMemory(const ShadowedMemory&) = delete;
  ShadowedMemory& operator=(const ShadowedMemory&) = delete;

  bool allocate(size_t bytes);
  uint8_t* data() const { return mem_; }
  size_t size() const { return size_; }
  uint64_t addr(uint64_t off = 0) const { return reinterpret_cast<uint64_t>(mem_ + off); }

  /// Memory and shadow both get pattern bytes [pos, pos+len) of `seed`.
  void fill(uint64_t off, uint64_t len, uint32_t seed, uint64_t pos = 0);
  /// Only the shadow: "an operation will have put this there".
  void expect(uint64_t off, uint64_t len, uint32_t seed, uint64_t pos = 0);
  void expect_bytes(uint64_t off, const void* p, uint64_t len);
  void expect_u64(uint64_t off, uint64_t v) { expect_bytes(off, &v, 8); }
  /// Accepts the current memory content of a range (bytes checked elsewhere).
  void accept(uint64_t off, uint64_t len);
  /// "" if every byte equals the shadow, else where and how it differs.
  std::string verify() const;
  uint64_t u64_at(uint64_t off) const;

 private:
  /// False (and remembered for verify()) if [off, off+len) is not inside.
  bool in_range(const char* what, uint64_t off, uint64_t len);

  uint8_t* mem_ = nullptr;
  size_t size_ = 0;
  std::vector<uint8_t> shadow_;
  std::string range_error_;
};

// ---------------------------------------------------------------------------
// Verbs objects

template <class T, int (*F)(T*)>
struct VerbsDeleter {
  void operator()(T* p) const {
    if (p) (void)F(p);
  }
};
using ContextPtr = std::unique_ptr<ibv_context, VerbsDeleter<ibv_context, ibv_close_device>>;
using PdPtr = std::unique_ptr<ibv_pd, VerbsDeleter<ibv_pd, ibv_dealloc_pd>>;
using MrPtr = std::unique_ptr<ibv_mr, VerbsDeleter<ibv_mr, ibv_dereg_mr>>;
using CqPtr = std::unique_ptr<ibv_cq, VerbsDeleter<ibv_cq, ibv_destroy_cq>>;
using QpPtr = std::unique_ptr<ibv_qp, VerbsDeleter<ibv_qp, ibv_destroy_qp>>;
using SrqPtr = std::unique_ptr<ibv_srq, VerbsDeleter<ibv_srq, ibv_destroy_srq>>;
using AhPtr = std::unique_ptr<ibv_ah, VerbsDeleter<ibv_ah, ibv_destroy_ah>>;
using CompChannelPtr =
    std::unique_ptr<ibv_comp_channel, VerbsDeleter<ibv_comp_channel, ibv_destroy_comp_channel>>;

/// An opened device and a PD. Declared in destruction order (pd first).
struct Device {
  ContextPtr ctx;
  PdPtr pd;
  ibv_gid gid{};
};
/// Finds kDeviceName with ibv_get_device_list, opens it, allocates a PD and
/// reads GID gid_index(). Call it in the process that will use the objects.
bool open_device(Device* d, std::string* err);

/// What two peers exchange to connect: plain bytes on the channel.
struct WireInfo {
  uint32_t qpn = 0;
  uint32_t rkey = 0;
  uint64_t addr = 0;
  uint64_t len = 0;
  uint8_t gid[16] = {};
  uint32_t qkey = 0;
  uint32_t pad = 0;
};

struct QpCaps {
  uint32_t max_send_wr = 64;
  uint32_t max_recv_wr = 64;
  uint32_t max_sge = 4;
  uint32_t max_inline = 256;
  bool sq_sig_all = false;
};
/// ibv_create_qp with `caps`; recv side on `srq` if given.
ibv_qp* create_qp(ibv_pd* pd, ibv_qp_type type, ibv_cq* scq, ibv_cq* rcq, ibv_srq* srq, const QpCaps& caps);
/// RESET -> INIT -> RTR -> RTS. RC/UC use `peer` (qpn, gid) as the path with
/// is_global=1, sgid_index gid_index() and `flow_label`; UD ignores `peer`
/// and uses `qkey`. RC: `rnr_retry` (7 = retry for ever; 0 = an RNR NAK
/// fails the WR at once, as librdmacm's programs that leave it 0 get).
bool connect_qp(ibv_qp* qp, ibv_qp_type type, const WireInfo& peer, uint32_t qkey, std::string* err,
                uint32_t flow_label = 0, uint8_t rnr_retry = 7);
/// Address handle to `gid` through GID gid_index().
ibv_ah* create_ah(ibv_pd* pd, const uint8_t gid[16]);

/// Polls until one completion arrives or `timeout_ms` passes.
std::optional<ibv_wc> poll_one(ibv_cq* cq, int timeout_ms = kWaitMs);
/// Polls until `n` completions or the timeout; returns what arrived.
std::vector<ibv_wc> poll_n(ibv_cq* cq, size_t n, int timeout_ms = kWaitMs);
/// Completions already queued (polls for `settle_ms` before deciding "none").
std::vector<ibv_wc> drain_cq(ibv_cq* cq, int settle_ms);
std::string wc_str(const ibv_wc& wc);
/// Network-order immediate as ibv_wc.imm_data / ibv_send_wr.imm_data carry it.
uint32_t imm_be(uint32_t host);

/// One QP with its CQs and one registered, shadowed buffer: what one side
/// of most tests needs. Members are declared in destruction order.
struct EndConfig {
  ibv_qp_type type = IBV_QPT_RC;
  size_t buf_bytes = 4u << 20;
  QpCaps caps;
  int cqe = 256;
  uint32_t qkey = kQkey;
  uint32_t bg_seed = 1;       // the whole buffer starts as this pattern
  bool recv_channel = false;  // give the receive CQ a completion channel
  uint32_t flow_label = 0;    // RC/UC: the path's GRH flow label
};
struct LocalEnd {
  EndConfig cfg;
  Device dev;
  CompChannelPtr channel;
  CqPtr scq;
  CqPtr rcq;
  QpPtr qp;
  ShadowedMemory mem;
  MrPtr mr;
  AhPtr ah;  // UD: to the connected peer
  uint32_t peer_qpn = 0;
  uint32_t peer_qkey = 0;

  bool open(const EndConfig& c, std::string* err);
  WireInfo info() const;
  /// Brings the QP to RTS towards `peer` (UD: RTS plus an AH to the peer).
  bool connect(const WireInfo& peer, std::string* err);
  ibv_sge sge(uint64_t off, uint32_t len) const;
  int post_recv(uint64_t wr_id, std::initializer_list<ibv_sge> sges);
};

// ---------------------------------------------------------------------------
// Agent: a QP in a child process, driven by commands

struct Seg {
  uint64_t off;
  uint32_t len;
};

/// A send the agent should post (its own buffer offsets; RDMA targets are
/// addresses in the peer).
struct AgentSend {
  uint64_t wr_id = 0;
  ibv_wr_opcode opcode = IBV_WR_SEND;
  uint32_t flags = IBV_SEND_SIGNALED;
  uint32_t imm = 0;  // network order
  std::vector<Seg> sges;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  uint32_t remote_qkey = kQkey;  // UD
  uint32_t delay_ms = 0;         // the agent sleeps this long before posting
};

struct AgentCmd;  // wire format, verbs_harness.cc
struct AgentReply;

class Agent {
 public:
  /// Forks the agent; it opens its own device and QP (cfg), fills its buffer
  /// with cfg.bg_seed and sends its WireInfo.
  static std::unique_ptr<Agent> start(const EndConfig& cfg, std::string* err);
  const WireInfo& info() const { return info_; }
  /// Sends our WireInfo; returns when the agent's QP is in RTS.
  bool connect(const WireInfo& peer);

  int post_recv(uint64_t wr_id, std::initializer_list<Seg> sges);
  /// 1: a completion in *wc; 0: none within timeout_ms; -1: agent failure (error()).
  int poll_recv(ibv_wc* wc, int timeout_ms = kWaitMs);
  int post_send(const AgentSend& s);
  /// Sends the command and returns at once, so this process can block
  /// elsewhere (a completion channel) while the agent posts; finish_send()
  /// then collects the post's result.
  bool post_send_nowait(const AgentSend& s);
  int finish_send();
  int poll_send(ibv_wc* wc, int timeout_ms = kWaitMs);
  bool fill(uint64_t off, uint64_t len, uint32_t seed, uint64_t pos = 0);
  bool expect(uint64_t off, uint64_t len, uint32_t seed, uint64_t pos = 0);
  bool expect_bytes(uint64_t off, const void* p, uint32_t len);
  bool expect_u64(uint64_t off, uint64_t v) { return expect_bytes(off, &v, 8); }
  /// Up to 64 bytes of the agent's buffer.
  std::vector<uint8_t> read_bytes(uint64_t off, uint32_t len);
  /// "" if every byte of the agent's buffer is as expected.
  std::string verify();

  PeerProcess& proc() { return *proc_; }
  const std::string& error() const { return error_; }
  /// Address of byte `off` of the agent's buffer, as RDMA names it.
  uint64_t raddr(uint64_t off) const { return info_.addr + off; }
  uint32_t rkey() const { return info_.rkey; }

 private:
  bool call(const AgentCmd& c, AgentReply* r, int timeout_ms = kWaitMs);
  std::unique_ptr<PeerProcess> proc_;
  WireInfo info_;
  std::string error_;
};

}  // namespace uroce::test
