// Segmentation rules (IBA 9.7.1, 9.7.2): packets and PSNs per message at
// each path MTU, opcodes in order, bytes covered exactly once, and which
// opcode may follow which.
#include "transport/packetizer.h"

#include <gtest/gtest.h>

namespace uroce::transport {
namespace {

using namespace uroce::wire;

TEST(Packetizer, PacketsAndPsnsPerMessage) {
  EXPECT_EQ(pmtu_bytes(1), 256u);
  EXPECT_EQ(pmtu_bytes(5), 4096u);
  EXPECT_EQ(pmtu_bytes(6), 0u);
  EXPECT_EQ(packets_for(MsgKind::kSend, 0, 1024), 1u);
  EXPECT_EQ(packets_for(MsgKind::kSend, 1024, 1024), 1u);
  EXPECT_EQ(packets_for(MsgKind::kSend, 1025, 1024), 2u);
  EXPECT_EQ(packets_for(MsgKind::kWrite, 1u << 20, 4096), 256u);
  EXPECT_EQ(packets_for(MsgKind::kReadRequest, 1u << 20, 4096), 1u);
  EXPECT_EQ(psns_for(MsgKind::kReadRequest, 1u << 20, 4096), 256u);
  EXPECT_EQ(psns_for(MsgKind::kReadRequest, 0, 4096), 1u);
  EXPECT_EQ(psns_for(MsgKind::kFetchAdd, 8, 256), 1u);
}

TEST(Packetizer, EveryByteOnceInOrderWithTheRightOpcodes) {
  struct Case {
    MsgKind k;
    Op only, first, middle, last;
  } cases[] = {
      {MsgKind::kSend, kSendOnly, kSendFirst, kSendMiddle, kSendLast},
      {MsgKind::kSendImm, kSendOnlyImm, kSendFirst, kSendMiddle, kSendLastImm},
      {MsgKind::kSendInv, kSendOnlyInv, kSendFirst, kSendMiddle, kSendLastInv},
      {MsgKind::kWrite, kWriteOnly, kWriteFirst, kWriteMiddle, kWriteLast},
      {MsgKind::kWriteImm, kWriteOnlyImm, kWriteFirst, kWriteMiddle, kWriteLastImm},
      {MsgKind::kReadResponse, kReadResponseOnly, kReadResponseFirst, kReadResponseMiddle, kReadResponseLast},
  };
  for (const Case& c : cases) {
    for (uint32_t pmtu : {256u, 1024u, 4096u}) {
      for (uint64_t len : {0ull, 1ull, 255ull, 256ull, 257ull, 1000ull, 4096ull, 12289ull}) {
        const uint32_t n = packets_for(c.k, len, pmtu);
        uint64_t next = 0;
        uint8_t prev = kNoPrev;
        for (uint32_t i = 0; i < n; ++i) {
          PacketSpan s = packet_of(c.k, len, pmtu, i);
          EXPECT_EQ(s.offset, next);
          EXPECT_LE(s.len, pmtu);
          if (!s.last) {
            EXPECT_EQ(s.len, pmtu) << "FIRST and MIDDLE carry exactly the PMTU";
          }
          EXPECT_EQ(s.first, i == 0);
          EXPECT_EQ(s.last, i + 1 == n);
          const Op want = n == 1 ? c.only : i == 0 ? c.first : i + 1 == n ? c.last : c.middle;
          EXPECT_EQ(s.op, want) << int(c.k) << " len " << len << " pmtu " << pmtu << " i " << i;
          EXPECT_TRUE(opcode_follows(prev, s.op)) << int(prev) << " -> " << int(s.op);
          prev = s.op;
          next += s.len;
        }
        EXPECT_EQ(next, len);
        EXPECT_FALSE(leaves_message_open(prev));
      }
    }
  }
}

TEST(Packetizer, OpcodeSequenceRules) {
  EXPECT_TRUE(opcode_follows(kNoPrev, kSendOnly));
  EXPECT_TRUE(opcode_follows(kSendOnly, kWriteFirst));
  EXPECT_FALSE(opcode_follows(kNoPrev, kSendMiddle));  // a MIDDLE with no FIRST
  EXPECT_FALSE(opcode_follows(kSendLast, kWriteLast));
  EXPECT_FALSE(opcode_follows(kSendFirst, kSendOnly));   // a new message inside one
  EXPECT_FALSE(opcode_follows(kSendFirst, kWriteLast));  // the wrong kind
  EXPECT_FALSE(opcode_follows(kWriteMiddle, kReadRequest));
  EXPECT_TRUE(opcode_follows(kWriteFirst, kWriteLastImm));
  EXPECT_TRUE(opcode_follows(kSendMiddle, kSendLastInv));
  EXPECT_TRUE(opcode_follows(kReadResponseFirst, kReadResponseLast));
  EXPECT_FALSE(opcode_follows(kReadResponseFirst, kReadResponseOnly));
}

}  // namespace
}  // namespace uroce::transport
