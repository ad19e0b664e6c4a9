// A deterministic, seeded fault injector for a packet link (tests and
// demos): drops, duplicates, reorders (swaps with the next packet) and
// corrupts (one byte the ICRC covers) outgoing RoCE packets at configured rates. The same seed
// and the same packet sequence give the same faults, so a failing test
// replays exactly. Configured per device from UROCE_FAULTS, e.g.
// "drop=0.01,dup=0.001,reorder=0.01,corrupt=0.001,seed=7".
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/counted.h"
#include "common/status.h"

namespace uroce::link {

struct FaultConfig {
  double drop = 0, dup = 0, reorder = 0, corrupt = 0;  // probabilities per packet, 0..1
  uint64_t seed = 1;
  bool any() const { return drop > 0 || dup > 0 || reorder > 0 || corrupt > 0; }
};

/// Parses "key=value,..." with keys drop, dup, reorder, corrupt (0..1) and
/// seed; EINVAL on an unknown key or a bad value.
Result<FaultConfig> parse_faults(std::string_view spec);
std::string to_string(const FaultConfig& c);

class FaultInjector {
 public:
  /// Receives a packet that goes out, with the tag it was given (e.g. its destination).
  using Emit = std::function<void(std::span<const uint8_t>, uint64_t tag)>;
  struct Stats {
    uint64_t in = 0, out = 0, dropped = 0, duplicated = 0, reordered = 0, corrupted = 0;
  };

  explicit FaultInjector(const FaultConfig& c);
  /// One outgoing packet: `emit` runs zero, one or two times, for this packet
  /// and/or one held back from before (a reordered packet goes out right
  /// after the packet that follows it).
  void process(std::span<const uint8_t> pkt, const Emit& emit, uint64_t tag = 0);
  /// Sends a held-back packet now (call when the link goes idle).
  void flush(const Emit& emit);
  const Stats& stats() const { return stats_.get(); }
  /// Counts from now on into `s` (contract/counters.h).
  void count_into(Stats* s) { stats_.use(s); }

 private:
  double uniform();  // [0, 1)
  void send(std::span<const uint8_t> pkt, uint64_t tag, const Emit& emit);

  FaultConfig cfg_;
  uint64_t state_;
  Counted<Stats> stats_;
  std::vector<uint8_t> held_, scratch_;
  bool holding_ = false;
  uint64_t held_tag_ = 0;
};

}  // namespace uroce::link
