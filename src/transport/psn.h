// Packet sequence numbers: 24 bits, compared in serial-number arithmetic
// (IBA Vol. 1 9.7.5.1.1: the half of the PSN space behind the expected PSN
// holds duplicates, the half ahead holds packets that came too early).
#pragma once

#include <cstdint>

namespace uroce::transport {

constexpr uint32_t kPsnMask = 0xffffff;

constexpr uint32_t psn_add(uint32_t psn, int64_t n) { return uint32_t((int64_t(psn) + n) & kPsnMask); }

/// a - b as a signed distance in (-2^23, 2^23].
constexpr int32_t psn_diff(uint32_t a, uint32_t b) {
  int32_t d = int32_t((a - b) & kPsnMask);
  return d > (1 << 23) ? d - (1 << 24) : d;
}

static_assert(psn_diff(5, 3) == 2 && psn_diff(3, 5) == -2);
static_assert(psn_diff(0, kPsnMask) == 1 && psn_diff(kPsnMask, 0) == -1);
static_assert(psn_add(kPsnMask, 2) == 1);

}  // namespace uroce::transport
