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
  uint32_t qpn;          // the test's RC QP
  uint8_t gid[16];       // the test's GID (index kGidIndex of uroce_lo)
  uint32_t recvs;        // receives the peer posts before reporting ready
  uint32_t corrupt = 0;  // a Corruption the peer makes in its own segment before reporting ready
  // Nonzero: once its first receive completes, the peer moves its QP to ERR
  // and stops itself (SIGSTOP) at once: it says nothing afterwards but what
  // it sent before ibv_modify_qp returned.
  uint32_t err_and_stop_after_first_recv = 0;
};

/// What the peer scribbles into its own context segment (corrupt_segment_test.cc),
/// so that the test process, which reads that segment to act as the peer's
/// NIC, meets nonsense.
enum Corruption : uint32_t {
  kNoCorruption = 0,
  kSegMagic,    // the segment header's magic
  kMrTableOff,  // the header's MR table offset, far outside the segment
  kQpRingOffs,  // the QP's receive queue and CQ offsets, outside the segment
  kRqSlotsOff,  // the receive queue's slot array, far outside
  kRqStride,    // the receive queue's slot size, smaller than a WQE
  kRqTailJump,  // the receive queue's tail, 2^40 ahead of its head
  kCqSlotsOff,  // the receive CQ's slot array, far outside
  kCqCapacity,  // the receive CQ's capacity, 2^31
  kScribble,    // every byte after the MR table
  kNumCorruptions
};

/// Test -> peer, after PeerReady: make `corrupt` now; the peer answers with a
/// PeerReady (status 0, or the errno of what failed).
struct PeerCorrupt {
  uint32_t corrupt;
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
