// IB timer encodings (IBA vol. 1 table 45 and 9.7.6.1.3).
#include "transport/timers.h"

#include <gtest/gtest.h>

namespace uroce::transport {
namespace {

TEST(Timers, RnrTimerTable) {
  EXPECT_EQ(rnr_timer_ns(0), 655360000u);  // code 0 is the longest, 655.36 ms
  EXPECT_EQ(rnr_timer_ns(1), 10000u);
  EXPECT_EQ(rnr_timer_ns(12), 640000u);
  EXPECT_EQ(rnr_timer_ns(31), 491520000u);
}

TEST(Timers, AckTimeout) {
  EXPECT_EQ(ack_timeout_ns(0), 0u);  // infinite
  EXPECT_EQ(ack_timeout_ns(1), 8192u);
  EXPECT_EQ(ack_timeout_ns(14), 4096ull << 14);  // ~67 ms
}

}  // namespace
}  // namespace uroce::transport
