// IB transport timer encodings, and the retry budgets the timers spend.
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

/// Which of the IBA's two retry counts a budget keeps.
enum class RetryRule {
  kAckTimeout,  // retry_cnt: the local ACK timer expired (IBA 9.7.6.1.3)
  kRnr,         // rnr_retry: an RNR NAK came back (IBA 9.7.5.2.8); 7 means without end
};

/// The retries a requester has spent on the WQE at the head of its send
/// queue, and the rule that says when they are too many: the same for the
/// network requester (RcRequester) and the intra-host one (core/shm_engine.h).
class RetryBudget {
 public:
  explicit constexpr RetryBudget(RetryRule rule) : rule_(rule) {}
  /// True when no retry is left under the QP's current `limit` (3 bits):
  /// the WQE fails (RETRY_EXC_ERR, RNR_RETRY_EXC_ERR).
  constexpr bool exhausted(uint8_t limit) const {
    return !(rule_ == RetryRule::kRnr && limit == 7) && used_ >= limit;
  }
  /// Counts a retry made.
  constexpr void count() { ++used_; }
  /// One more retry: false when exhausted(limit), else counts it.
  constexpr bool spend(uint8_t limit) {
    if (exhausted(limit)) return false;
    count();
    return true;
  }
  /// The WQE made progress (or a new one is at the head): a full budget again.
  constexpr void reset() { used_ = 0; }
  constexpr uint32_t used() const { return used_; }

 private:
  RetryRule rule_;
  uint32_t used_ = 0;
};

}  // namespace uroce::transport
