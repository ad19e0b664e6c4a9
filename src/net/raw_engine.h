// The engine of a RAW_PACKET QP's send queue: each SEND carries a whole
// Ethernet frame without its FCS (ibv_post_send(3); perftest's raw tools
// build it in the buffer), which leaves as it is: to the QPs of this
// process whose flow rules claim it (net/raw_switch.h), and onto the wire
// through the process's AF_XDP socket for the device's interface when it
// has one. A frame longer than the port's MTU allows completes with a local
// length error, never truncated.
//
// Unpaced, work completes as it is posted, in order, unless the port's send
// ring is full: then it waits, as paced work does. Paced (packet pacing,
// IBV_QP_RATE_LIMIT or ibv_modify_qp_rate_limit(3), as mlx5 offers it on
// raw QPs): frames are copied at post and leave no faster than the rate,
// each completing as it leaves; the application's polls and the network
// engine's thread release what waits (NetEngine::add_raw_queue: every raw QP's
// engine), a burst of up to `max_burst_bytes` at once after an idle time.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "common/spin_lock.h"
#include "common/thread_annotations.h"
#include "contract/counters.h"
#include "net/link_engine.h"

namespace uroce::link {
class XdpPort;
}

namespace uroce::core {

class RawEngine final : public LinkEngine {
 public:
  /// `max_frame`: the longest frame the port carries (its MTU, an Ethernet
  /// header and one VLAN tag); `wire`: the process's AF_XDP port for the
  /// interface, or null (then the frame only reaches this process's QPs).
  /// `counters`: where its frames are counted (the QP's block), or null.
  RawEngine(QpOwner& owner, uint32_t ifindex, uint32_t qpn, uint32_t max_frame, link::XdpPort* wire,
            RawCounters* counters);
  /// The frames this QP put on the port's ring leave before it goes (a
  /// program that destroys its QP right after its last post, as perftest's
  /// servers do, must not lose the answer still waiting for a kick).
  ~RawEngine() override;
  void post(const SendWqe& w) override;
  void flush() override;
  void drain(bool on) override;
  /// RESET: what waits is dropped without completions (the QP purges its CQs).
  void reset();
  /// The pace, in kbit/s of frame bytes (0: unpaced); `max_burst_bytes`
  /// (0: one frame) may leave back to back after an idle time.
  void set_rate(uint32_t kbps, uint32_t max_burst_bytes);
  /// Sends what is due at `now` (ns); the time the next frame is due, or
  /// UINT64_MAX when none waits.
  uint64_t pump(uint64_t now);

  static constexpr uint32_t kEthHeaderBytes = 14;

 private:
  struct Pending {
    uint64_t wr_id;
    bool signaled;
    WcStatus status;  // of the local checks, at post
    std::vector<uint8_t> frame;
  };
  /// The frame onto the raw switch and the wire; false: the port's send
  /// ring is full (the frame must wait).
  bool send(std::span<const uint8_t> frame) REQUIRES(mu_);
  void count_sent(size_t bytes) REQUIRES(mu_);
  void complete(uint64_t wr_id, bool signaled, WcStatus st, uint32_t len) REQUIRES(mu_);
  uint64_t gap_ns(size_t bytes) const REQUIRES(mu_);
  uint64_t pump_locked(uint64_t now) REQUIRES(mu_);
  /// pump_locked's work, before waiting_ is brought up to date.
  uint64_t release(uint64_t now) REQUIRES(mu_);
  /// ERR: what waits completes with WR_FLUSH_ERR, and so will what comes.
  void flush_locked() REQUIRES(mu_);

  QpOwner& owner_;
  const uint32_t ifindex_, qpn_, max_frame_;
  link::XdpPort* wire_;
  RawCounters* const counters_;
  mutable SpinLock mu_;  // post (under the QP's send lock) against pump (under the engine's run lock)
  uint32_t unsignaled_ GUARDED_BY(mu_) = 0;
  uint32_t queued_ GUARDED_BY(mu_) = 0;        // frames put on the port's ring since this engine's last kick
  uint64_t last_sent_ns_ GUARDED_BY(mu_) = 0;  // when the last frame went on it (kRawKickSparseNs)
  std::vector<uint8_t> frame_ GUARDED_BY(mu_);
  uint32_t rate_kbps_ GUARDED_BY(mu_) = 0;
  uint32_t burst_bytes_ GUARDED_BY(mu_) = 0;
  bool draining_ GUARDED_BY(mu_) = false;
  bool errored_ GUARDED_BY(mu_) = false;  // the QP is in ERR (flush) until reset
  uint64_t next_ns_ GUARDED_BY(mu_) = 0;  // when the next frame may leave
  std::deque<Pending> pending_ GUARDED_BY(mu_);
  /// Whether anything waits: pump's look without the lock (every poll of a
  /// process with raw QPs asks); set under mu_.
  std::atomic<bool> waiting_{false};
};

}  // namespace uroce::core
