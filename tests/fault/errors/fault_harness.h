// Small helpers for the "bad input gets a clear error; nothing is lost" fault
// tests (tests/fault/errors): open uroce_lo, build and connect RC queue pairs
// inside one process, post and poll with bounded waits, and run a peer in a
// separate process (fork + exec of fault_errors_peer, so the peer has a clean
// library state and its own connection to uroced).
#pragma once

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fault/errors/peer_protocol.h"

namespace uroce::fault {

constexpr const char* kDeviceName = "uroce_lo";
/// RoCE v2 IPv4-mapped GID of 127.0.0.1 on uroce_lo.
constexpr int kGidIndex = 1;
/// Upper bound on any wait for something that must happen.
constexpr int kWaitMs = 5000;

constexpr unsigned kAllRemote =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

/// Opens uroce_lo; nullptr (errno set) when it is not there.
ibv_context* open_lo();
/// The GID at kGidIndex.
ibv_gid lo_gid(ibv_context* ctx);

// --- completions (every wait is bounded)

/// The next completion, or nothing after `timeout_ms`.
std::optional<ibv_wc> poll_one(ibv_cq* cq, int timeout_ms = kWaitMs);
/// Up to `n` completions, collected until `timeout_ms` passes.
std::vector<ibv_wc> poll_n(ibv_cq* cq, size_t n, int timeout_ms = kWaitMs);
/// Whatever arrives within `ms` (used to check that nothing more comes).
std::vector<ibv_wc> poll_for(ibv_cq* cq, int ms);

// --- QP state

/// Transport attributes of one RC end.
struct RcParams {
  unsigned qp_access = kAllRemote;  // qp_access_flags (what peers may do to us)
  uint8_t min_rnr_timer = 1;        // responder side: 0.01 ms
  uint8_t timeout = 14;             // local ACK timeout, 4.096 us * 2^14 = ~67 ms
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
};

int to_init(ibv_qp* qp, unsigned qp_access);
int to_rtr(ibv_qp* qp, uint32_t dest_qpn, const ibv_gid& dgid, uint8_t min_rnr_timer);
int to_rts(ibv_qp* qp, uint8_t timeout, uint8_t retry_cnt, uint8_t rnr_retry);
/// RESET -> INIT -> RTR -> RTS towards (dest_qpn, dgid).
int connect_rc(ibv_qp* qp, uint32_t dest_qpn, const ibv_gid& dgid, const RcParams& p);
/// A transition that needs only IBV_QP_STATE (to ERR or RESET).
int to_state(ibv_qp* qp, ibv_qp_state s);
/// The state ibv_query_qp reports.
ibv_qp_state query_state(ibv_qp* qp);

// --- endpoints

struct EndpointOptions {
  ibv_qp_type type = IBV_QPT_RC;
  uint32_t max_send_wr = 64;
  uint32_t max_recv_wr = 64;
  int cqe = 256;
  unsigned mr_access = kAllRemote;
  size_t buf_bytes = 1 << 16;
};

/// One side of a connection: its own PD, CQs, QP and registered buffer.
struct Endpoint {
  ibv_pd* pd = nullptr;
  ibv_cq* send_cq = nullptr;
  ibv_cq* recv_cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<uint8_t> buf;

  uint8_t* at(size_t off) { return buf.data() + off; }
  uint64_t addr(size_t off = 0) const { return reinterpret_cast<uint64_t>(buf.data()) + off; }
  ibv_sge sge(size_t off, uint32_t len) const { return ibv_sge{addr(off), len, mr->lkey}; }

  Endpoint() = default;
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;
  ~Endpoint();
};

::testing::AssertionResult make_endpoint(ibv_context* ctx, const EndpointOptions& o, Endpoint* e);

/// Two RC QPs of one context connected to each other. By convention `a`
/// initiates and `b` is the target.
struct RcPair {
  Endpoint a, b;
};

::testing::AssertionResult make_rc_pair(ibv_context* ctx, RcPair* p, const EndpointOptions& o = {},
                                        const RcParams& pa = {}, const RcParams& pb = {});

// --- posting shortcuts (return what ibv_post_* returns)

int post_send(ibv_qp* qp, uint64_t wr_id, ibv_wr_opcode op, ibv_sge* sge, int num_sge, uint64_t raddr = 0,
              uint32_t rkey = 0, unsigned flags = IBV_SEND_SIGNALED);
int post_recv(ibv_qp* qp, uint64_t wr_id, ibv_sge* sge, int num_sge);

// --- fixture

/// Opens uroce_lo for each test and closes it after. The context is closed in
/// the destructor, after the derived fixture's members (QPs, MRs...) are gone.
class VerbsTest : public ::testing::Test {
 protected:
  ~VerbsTest() override;
  void SetUp() override;
  ibv_context* ctx_ = nullptr;
  ibv_gid gid_{};
};

// --- processes

/// A peer in its own process: fork + exec of the fault_errors_peer binary
/// with one end of a socketpair on kPeerFd. It builds an RC QP connected to
/// ours and waits (bounded) until told to go or killed. Killed and reaped on
/// destruction, also when the test failed.
class Peer {
 public:
  Peer() = default;
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;
  ~Peer();

  /// Starts the peer and waits (bounded) for its PeerReady.
  ::testing::AssertionResult start(const PeerHello& hello, PeerReady* ready);
  /// Has the peer make corruption `c` (peer_protocol.h) in its segment now.
  ::testing::AssertionResult corrupt(uint32_t c);
  /// Sends `sig`, then reaps (bounded, SIGKILL as a last resort). True if reaped.
  bool kill_and_reap(int sig = SIGKILL);
  /// SIGKILLs the peer and waits (bounded) until it has died, but leaves it
  /// unreaped (a zombie: its pid still exists). True once it is dead.
  bool kill_leave_zombie();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int sock_ = -1;
};

/// The pid of the uroced that serves UROCE_DAEMON_NAME=`daemon_name` (found
/// by scanning /proc/*/environ and /proc/*/cmdline), or -1.
pid_t find_uroced(const std::string& daemon_name);

/// Milliseconds on CLOCK_MONOTONIC.
int64_t now_ms();

}  // namespace uroce::fault
