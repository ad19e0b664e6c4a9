// What the fault tests and their forked peer (peer_main.cc) say to each other
// over a socketpair: fixed-size structs, one datagram each. No gtest here, so
// the peer binary stays a plain verbs program.
#pragma once

#include <cstdint>

namespace uroce::fault {

/// The descriptor the peer finds its end of the socketpair on.
constexpr int kPeerFd = 3;

/// Test -> peer: who to connect to.
struct PeerHello {
  uint32_t qpn;     // the test's RC QP
  uint8_t gid[16];  // the test's GID (index kGidIndex of uroce_lo)
  uint32_t recvs;   // receives the peer posts before reporting ready
};

/// Peer -> test: the peer's RC QP is in RTS and its receives are posted.
struct PeerReady {
  int32_t status;  // 0, or the errno of the step that failed
  uint32_t qpn;
  uint8_t gid[16];
  uint64_t addr;  // a registered buffer (LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ)
  uint32_t rkey;
  uint32_t len;
};

/// Size of the peer's registered buffer; each posted receive gets a slice.
constexpr uint32_t kPeerBufBytes = 1 << 16;

}  // namespace uroce::fault
