// The process's raw Ethernet switch: the flow steering rules
// (ibv_create_flow(3)) of its RAW_PACKET and UD QPs, per device, and the
// delivery of a frame to the QPs whose rules claim it — frames its raw QPs
// send (what a NIC loops back to its own queues) and frames its AF_XDP
// socket receives. As a NIC's steering tables:
//
// - NORMAL rules in priority order (a lower value first): every QP whose
//   rule matches at the first priority that matches gets the frame, once;
//   a rule with DONT_TRAP lets the next priority that matches have it too.
// - No NORMAL rule claims it: a multicast frame goes to the MC_DEFAULT
//   rules' QPs, if any; otherwise (unicast, or no MC_DEFAULT rule) to the
//   ALL_DEFAULT rules' QPs.
// - SNIFFER rules get every frame, received or sent.
//
// A QP whose receive queue is empty, or that is not in RTR or RTS, drops
// the frame (counted in stats().dropped, and as raw.dropped in the counters
// of the QP the rule names, which `uroce stat --qp` shows); a frame never
// goes to a QP no rule names, nor back to the QP that sent it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <span>
#include <vector>

#include "common/small_vec.h"
#include "common/spin_lock.h"
#include "contract/counters.h"
#include "contract/flow_rule.h"
#include "memory/peer_map.h"

namespace uroce::core {

class RawSwitch {
 public:
  static RawSwitch& get();

  /// Steers the frames of device `ifindex` that `r` matches to QP `qpn` (of
  /// this process) — with `rss`, to the work queue of its table that the
  /// frame's hash picks; the rule's handle (never 0), or an error (a queue
  /// cannot be reached: ENOENT).
  Result<uint64_t> add(uint32_t ifindex, uint32_t qpn, const FlowRule& r, const RssConfig* rss = nullptr);
  /// Removes a rule; false if there is none with this handle. When it
  /// returns, no frame is being delivered through it.
  bool remove(uint64_t handle);
  /// ibv_attach_mcast on a raw QP: a NORMAL rule on the group's MAC.
  Result<uint64_t> add_mac(uint32_t ifindex, uint32_t qpn, const uint8_t mac[6]);
  /// Removes every rule of `qpn` (the QP goes); their handles.
  std::vector<uint64_t> remove_qp(uint32_t qpn);
  /// How many rules name `qpn`.
  size_t rules_of(uint32_t qpn) const;

  /// A frame raw QP `from_qpn` sends on `ifindex`: to the QPs of this process
  /// whose rules claim it, and to the sniffers.
  void sent(uint32_t ifindex, uint32_t from_qpn, std::span<const uint8_t> frame);
  /// A frame the wire brought to `ifindex`: true if a rule trapped it (no
  /// DONT_TRAP), i.e. the kernel's stack should not see it.
  bool received(uint32_t ifindex, std::span<const uint8_t> frame);

  struct Stats {
    std::atomic<uint64_t> delivered{0};
    std::atomic<uint64_t> dropped{0};  // the QP had no receive, or did not receive
  };
  const Stats& stats() const { return stats_; }
  /// Whether any rule exists (a cheap look before the work of a frame).
  bool any() const { return count_.load(std::memory_order_relaxed) != 0; }
  /// How many rules there are, for a reader that polls it (XdpPort::Options).
  const std::atomic<size_t>& rule_count() const { return count_; }

 private:
  /// A receive queue frames go to: a QP's, or a work queue's.
  struct Sink {
    PeerQp peer;
    SpinLock mu;  // the peer's requester-side caches (rq_tail_seen, ...)
  };
  /// What a rule names: one QP's receive queue, or (RSS) a table of them.
  struct Target {
    std::vector<std::unique_ptr<Sink>> sinks;
    RawCounters* counters = nullptr;  // the rule's QP's (contract/counters.h), or null
    RssConfig rss;                    // with sinks.size() > 1 or rss.key_len: the hash picks
    bool hashed = false;
  };
  struct Entry {
    uint64_t handle;
    uint32_t ifindex;
    uint32_t qpn;
    FlowRule rule;
    std::shared_ptr<Target> target;
  };
  /// Who gets a frame; true if trapped. `exclude`: the sender.
  using Targets = SmallVec<Target*, 8>;  // a frame's receivers: no allocation per frame
  bool route(uint32_t ifindex, const wire::FlowKey& k, uint32_t exclude, Targets* to) const;
  void deliver(Target* t, const wire::FlowKey& k, std::span<const uint8_t> frame);

  mutable std::shared_mutex mu_;
  std::vector<Entry> rules_;  // by (priority, handle)
  uint64_t next_handle_ = 1;
  std::atomic<size_t> count_{0};
  Stats stats_;
};

}  // namespace uroce::core
