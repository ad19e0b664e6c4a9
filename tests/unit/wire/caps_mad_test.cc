// uroce's capability MAD (wire/caps_mad.h): the bytes of the query and the
// answer, and what decode refuses (a CM MAD, another vendor's answer, a
// status such as the "unsupported" a kernel's MAD layer would send).
#include "wire/caps_mad.h"

#include <gtest/gtest.h>

#include <cstring>

namespace uroce::wire::caps {
namespace {

TEST(CapsMad, QueryAndAnswerSitWhereTheMadHeaderSays) {
  uint8_t q[cm::kMadSize];
  encode(Caps{false, 0x0102030405060708ull, 0}, q);
  EXPECT_EQ(q[0], 1);     // base version
  EXPECT_EQ(q[1], 0x09);  // vendor class, range 1
  EXPECT_EQ(q[2], 1);     // class version
  EXPECT_EQ(q[3], 0x01);  // Get
  EXPECT_EQ(q[4], 0);     // status
  EXPECT_EQ(q[5], 0);
  EXPECT_EQ(q[8], 0x01);  // TID, big-endian
  EXPECT_EQ(q[15], 0x08);
  EXPECT_EQ(q[16], 0xff);  // attribute 0xff55
  EXPECT_EQ(q[17], 0x55);
  EXPECT_EQ(memcmp(q + 24, "uroceCAP", 8), 0);
  for (size_t i = 36; i < cm::kMadSize; ++i) ASSERT_EQ(q[i], 0) << i;
  Caps d;
  ASSERT_TRUE(decode(q, &d));
  EXPECT_FALSE(d.reply);
  EXPECT_EQ(d.tid, 0x0102030405060708ull);

  uint8_t a[cm::kMadSize];
  encode(Caps{true, 7, kKeepsOutOfOrder}, a);
  EXPECT_EQ(a[3], 0x81);  // GetResp
  EXPECT_EQ(a[35], 1);    // the flags, big-endian
  ASSERT_TRUE(decode(a, &d));
  EXPECT_TRUE(d.reply);
  EXPECT_EQ(d.tid, 7u);
  EXPECT_EQ(d.flags, kKeepsOutOfOrder);
}

TEST(CapsMad, DecodeRefusesWhatIsNotOurs) {
  uint8_t a[cm::kMadSize];
  Caps d;
  encode(Caps{true, 7, kKeepsOutOfOrder}, a);
  uint8_t b[cm::kMadSize];
  memcpy(b, a, sizeof b);
  b[5] = 0x0c;  // status: unsupported method / attribute
  EXPECT_FALSE(decode(b, &d));
  memcpy(b, a, sizeof b);
  b[1] = cm::kClassCm;
  EXPECT_FALSE(decode(b, &d));
  memcpy(b, a, sizeof b);
  b[24] ^= 1;  // another vendor's data
  EXPECT_FALSE(decode(b, &d));
  memcpy(b, a, sizeof b);
  b[17] = 0x56;
  EXPECT_FALSE(decode(b, &d));
  EXPECT_FALSE(decode(std::span<const uint8_t>(a, 100), &d));
}

}  // namespace
}  // namespace uroce::wire::caps
