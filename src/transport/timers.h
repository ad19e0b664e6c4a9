// IB transport timer encodings.
#pragma once

#include <cstdint>

namespace uroce::transport {

/// RNR NAK timer field (5 bits) to nanoseconds (IBA vol. 1, table 45).
inline uint64_t rnr_timer_ns(uint32_t code) {
  static constexpr uint32_t kMicros[32] = {655360, 10,    20,    30,     40,     60,     80,     120,
                                           160,    240,   320,   480,    640,    960,    1280,   1920,
                                           2560,   3840,  5120,  7680,   10240,  15360,  20480,  30720,
                                           40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};
  return uint64_t(kMicros[code & 31]) * 1000;
}

/// Local ACK timeout (5 bits): 4.096 us * 2^timeout; 0 means infinite (IBA 9.7.6.1.3).
inline uint64_t ack_timeout_ns(uint32_t timeout) {
  if (timeout == 0) return 0;
  return uint64_t(4096) << (timeout & 31);
}

}  // namespace uroce::transport
