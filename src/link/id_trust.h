// Which IPv4 identifications a receiver believes (docs/network-link.md "The
// IPv4 identification"). A datagram socket does not see the identification
// its packet carried, so the receiver solves the ICRC for it; any value
// solves a corrupted packet with a chance of 1 / 2^16, so a value is
// believed only with evidence that the sender used it:
//  - 0..63: what uroce (and any sender on an unconnected socket with DF)
//    writes: 0, or k for the k-th datagram of a UDP GSO send;
//  - the continuation of a counter seen from the same flow (address, port,
//    destination QP) or the same host (address: Linux's generator for
//    packets without a socket, which kernel rxe uses, is one per pair of
//    hosts);
//  - uroced saw the frame on the wire with that identification (link/id_watch.h);
//  - the next packet of the same host continues it closely (both are believed).
// A packet without such evidence waits (parked, copied) for uroced's record
// or a successor, for a bounded time, then is dropped and counted.
// The chance that a corrupted packet is believed: a corrupted packet solves
// for one given value with a chance of 1 / 2^32, so it is the number of
// values believed for it, (64 + 2 x kWindow + kSuccessor + 1) / 2^32, about
// 1,300 / 2^32 (measured: docs/network-link.md).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/counted.h"
#include "common/fn_ref.h"
#include "link/id_watch.h"

namespace uroce::link {

class IdTrust {
 public:
  /// Values below this are believed as they are (uroce's senders).
  static constexpr uint16_t kOwnIds = 64;
  /// A counter is continued by a value at most this far ahead of its next
  /// value, or at most kBehind behind it.
  static constexpr uint16_t kAhead = 512, kBehind = 128;
  /// A parked packet is proven by the next packet of its host (to this
  /// receiver) if that one's identification is at most this far after it.
  static constexpr uint16_t kSuccessor = 16;
  /// Parked packets per receiver at most (a full park drops its oldest).
  static constexpr size_t kMaxParked = 64;
  /// How long a packet waits for evidence: for uroced's record while it
  /// reads frames (uroced must be scheduled first: on a loaded machine,
  /// tens of milliseconds; 50 ms lost a UD ping-pong's first packet with
  /// kernel rxe once), else only for a successor.
  static constexpr uint64_t kWaitWatchedNs = 500'000'000, kWaitNs = 5'000'000;

  struct Stats {
    uint64_t parked = 0;     // packets that had to wait
    uint64_t vouched = 0;    // believed on uroced's record
    uint64_t succeeded = 0;  // believed because the next packet continued them
    uint64_t unproven = 0;   // dropped: no evidence in time
  };
  /// A packet to hand on: its bytes (BTH to ICRC), where it came from, its identification.
  using Deliver = FnRef<void(std::span<const uint8_t> pkt, uint32_t saddr, uint16_t sport, uint16_t id)>;

  /// Judges packet `pkt` (BTH to ICRC) from saddr:sport to daddr, whose
  /// ICRC solved for `id`. Believed: parked packets it proves go first, then
  /// it, through `deliver`. Otherwise it is parked or dropped (counted).
  void judge(std::span<const uint8_t> pkt, uint32_t saddr, uint16_t sport, uint32_t daddr, uint16_t id,
             uint64_t now_ns, Deliver deliver);
  /// Another datagram from `saddr` that proves nothing of the parked ones
  /// (its ICRC solves for no identification, or for one of uroce's own): it
  /// was their host's next packet, and their chance of a successor is gone.
  void saw_other(uint32_t saddr) {
    for (Parked& p : parked_)
      if (p.key.saddr == saddr) p.open = false;
  }
  /// Looks at the parked packets again: those proven since go (in order of
  /// arrival), those out of time are dropped.
  void recheck(uint64_t now_ns, Deliver deliver);
  bool parked() const { return !parked_.empty(); }
  const Stats& stats() const { return stats_.get(); }
  /// Counts from now on into `s` (contract/counters.h).
  void count_into(Stats* s) { stats_.use(s); }

 private:
  struct Counter {
    uint32_t saddr = 0;
    uint16_t sport = 0;  // 0 with dqp kHostQp: the host's counter
    uint32_t dqp = 0;
    uint16_t next = 0;
    bool known = false;
  };
  static constexpr uint32_t kHostQp = 1u << 24;  // no QP has this number
  struct Parked {
    std::vector<uint8_t> bytes;
    IdKey key;
    uint16_t id;
    uint64_t deadline;
    bool open = true;     // the next packet of its host has not come yet
    bool proven = false;  // it came, and continued this one
  };
  /// Whether `id` continues the flow's or the host's counter (advancing them).
  bool continues(const IdKey& k, uint16_t id);
  /// Moves the flow's and the host's counters past `id` (only forward unless `force`).
  void note(const IdKey& k, uint16_t id, bool force);
  Counter* find(uint32_t saddr, uint16_t sport, uint32_t dqp);
  /// Hands on the parked packets marked proven, in order, and forgets them.
  void release_proven(Deliver deliver);
  void hand_on(Parked& p, Deliver deliver);

  static constexpr int kCounters = 8;
  Counter counters_[kCounters];
  unsigned victim_ = 0;
  std::vector<Parked> parked_;  // in order of arrival
  Counted<Stats> stats_;
};

}  // namespace uroce::link
