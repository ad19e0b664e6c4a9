// The wire codec (src/wire): every opcode of the table round-trips through
// encode/decode with every field and payload length it allows; the bytes
// sit where IBTA Vol. 1 ch. 9 puts them; malformed input is rejected with
// the right reason and never read past its end.
#include "wire/packet.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "wire/icrc.h"
#include "wire/ip_udp.h"
#include "wire/opcodes.h"

namespace uroce::wire {
namespace {

constexpr Service kServices[] = {Service::kRc, Service::kUc, Service::kUd, Service::kXrc};

Packet full_packet(uint8_t opc, std::span<const uint8_t> payload) {
  Packet p;
  p.bth.opcode = opc;
  p.bth.solicited = true;
  p.bth.ack_req = true;
  p.bth.pkey = 0xffff;
  p.bth.dest_qp = 0xabcdef;
  p.bth.psn = 0x123456;
  p.va = 0x0102030405060708ull;
  p.rkey = 0x11223344;
  p.dma_len = 0x55667788;
  p.swap_add = 0x99aabbccddeeff00ull;
  p.compare = 0x0f1e2d3c4b5a6978ull;
  p.syndrome = syndrome_nak(NakCode::kRemoteAccessError);
  p.msn = 0x00beef;
  p.atomic_orig = 0xdeadbeefcafef00dull;
  p.imm = 0x04030201;
  p.inv_rkey = 0x7654321;
  p.qkey = 0x80010000;
  p.src_qp = 0x000abc;
  p.xrc_srqn = 0x00c0de;
  p.payload = payload;
  return p;
}

TEST(WirePacket, EveryOpcodeRoundTripsWithEveryAllowedPayloadLength) {
  std::vector<uint8_t> data(70);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 13 + 1);
  int checked = 0;
  for (Service s : kServices) {
    for (uint8_t op = 0; op < 32; ++op) {
      const uint8_t opc = opcode(s, Op(op));
      const OpInfo* info = op_info(opc);
      if (!info) continue;
      for (size_t len : {0, 1, 2, 3, 4, 5, 8, 64, 70}) {
        if (info->payload == Payload::kNone && len) continue;
        if (info->payload == Payload::kEight && len != 8) continue;
        Packet in = full_packet(opc, std::span<const uint8_t>(data.data(), len));
        std::vector<uint8_t> buf(encoded_size(in) + kIcrcBytes);
        ASSERT_EQ(encode(in, buf.data(), buf.size()), buf.size() - kIcrcBytes) << info->name;
        EXPECT_EQ(buf.size() % 4, 0u) << info->name << " " << len;
        EXPECT_EQ(in.bth.pad, (4 - len % 4) % 4);
        Packet out;
        ASSERT_EQ(decode(buf, &out), DecodeError::kNone) << info->name << " len " << len;
        EXPECT_EQ(out.bth.opcode, opc);
        EXPECT_EQ(out.bth.dest_qp, 0xabcdefu);
        EXPECT_EQ(out.bth.psn, 0x123456u);
        EXPECT_TRUE(out.bth.solicited && out.bth.ack_req);
        ASSERT_EQ(out.payload.size(), len) << info->name;
        EXPECT_EQ(memcmp(out.payload.data(), data.data(), len), 0);
        const uint16_t h = headers_of(opc);
        if (h & (kReth | kAtomicEth)) {
          EXPECT_EQ(out.va, in.va);
          EXPECT_EQ(out.rkey, in.rkey);
        }
        if (h & kReth) {
          EXPECT_EQ(out.dma_len, in.dma_len);
        }
        if (h & kAtomicEth) {
          EXPECT_EQ(out.swap_add, in.swap_add);
          EXPECT_EQ(out.compare, in.compare);
        }
        if (h & kAeth) {
          EXPECT_EQ(out.syndrome, in.syndrome);
          EXPECT_EQ(out.msn, in.msn);
        }
        if (h & kAtomicAckEth) {
          EXPECT_EQ(out.atomic_orig, in.atomic_orig);
        }
        if (h & kImmDt) {
          EXPECT_EQ(out.imm, in.imm);
        }
        if (h & kIeth) {
          EXPECT_EQ(out.inv_rkey, in.inv_rkey);
        }
        if (h & kDeth) {
          EXPECT_EQ(out.qkey, in.qkey);
          EXPECT_EQ(out.src_qp, in.src_qp);
        }
        if (h & kXrcEth) {
          EXPECT_EQ(out.xrc_srqn, in.xrc_srqn);
        }
        ++checked;
      }
    }
  }
  // RC and XRC: 18 opcodes with a payload (9 lengths each), 5 without and
  // ATOMIC WRITE (8 bytes only); UC 12; UD 2.
  EXPECT_EQ(checked, 2 * (18 * 9 + 5 + 1) + 12 * 9 + 2 * 9);
}

TEST(WirePacket, BytesSitWhereTheSpecPutsThem) {
  const uint8_t payload[3] = {0xa1, 0xa2, 0xa3};
  Packet p = full_packet(opcode(Service::kRc, kWriteOnlyImm), payload);
  p.bth.mig_req = true;
  uint8_t b[64] = {};
  ASSERT_EQ(encode(p, b, sizeof(b)), 12u + 16 + 4 + 4);
  const uint8_t bth[12] = {0x0b, 0x80 | 0x40 | 0x10, 0xff, 0xff, 0x00, 0xab, 0xcd, 0xef, 0x80, 0x12, 0x34,
                           0x56};
  EXPECT_EQ(memcmp(b, bth, 12), 0);  // SE, M, PadCnt 1, TVer 0; A bit; 24-bit QPN and PSN
  const uint8_t reth[16] = {1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
  EXPECT_EQ(memcmp(b + 12, reth, 16), 0);
  EXPECT_EQ(memcmp(b + 28, "\x01\x02\x03\x04", 4), 0);  // ImmDt exactly as carried
  EXPECT_EQ(memcmp(b + 32, "\xa1\xa2\xa3\x00", 4), 0);  // payload, one pad byte of 0

  Packet u = full_packet(opcode(Service::kUd, kSendOnly), {});
  ASSERT_EQ(encode(u, b, sizeof(b)), 20u);
  EXPECT_EQ(b[0], 0x64);
  EXPECT_EQ(memcmp(b + 12, "\x80\x01\x00\x00\x00\x00\x0a\xbc", 8), 0);  // DETH: Q_Key, 0, source QP

  Packet a = full_packet(opcode(Service::kRc, kAtomicAcknowledge), {});
  a.syndrome = syndrome_ack(kCreditsInvalid);
  ASSERT_EQ(encode(a, b, sizeof(b)), 24u);
  EXPECT_EQ(memcmp(b + 12, "\x1f\x00\xbe\xef", 4), 0);  // AETH
  EXPECT_EQ(memcmp(b + 16, "\xde\xad\xbe\xef\xca\xfe\xf0\x0d", 8), 0);

  Packet x = full_packet(opcode(Service::kXrc, kFetchAdd), {});
  ASSERT_EQ(encode(x, b, sizeof(b)), 12u + 4 + 28);
  EXPECT_EQ(memcmp(b + 12, "\x00\x00\xc0\xde", 4), 0);  // XRCETH before the AtomicETH
  EXPECT_EQ(memcmp(b + 16, "\x01\x02\x03\x04\x05\x06\x07\x08\x11\x22\x33\x44", 12), 0);
}

TEST(WirePacket, AethSyndromes) {
  EXPECT_EQ(ack_type(syndrome_ack(5)), AckType::kAck);
  EXPECT_EQ(ack_value(syndrome_ack(5)), 5);
  EXPECT_EQ(ack_type(syndrome_rnr_nak(14)), AckType::kRnrNak);
  EXPECT_EQ(ack_value(syndrome_rnr_nak(14)), 14);
  EXPECT_EQ(syndrome_nak(NakCode::kPsnSequenceError), 0x60);
  EXPECT_EQ(syndrome_nak(NakCode::kRemoteOperationalError), 0x63);
  EXPECT_TRUE(syndrome_valid(0x64));   // NAK invalid RD request
  EXPECT_FALSE(syndrome_valid(0x65));  // reserved NAK code
  EXPECT_FALSE(syndrome_valid(0x40));  // reserved type
  EXPECT_FALSE(syndrome_valid(0x80));  // reserved bit 7
}

TEST(WirePacket, MalformedInputIsRejectedWithItsReason) {
  uint8_t payload[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  Packet p = full_packet(opcode(Service::kRc, kWriteFirst), payload);
  std::vector<uint8_t> good(encoded_size(p) + kIcrcBytes);
  ASSERT_NE(encode(p, good.data(), good.size()), 0u);
  Packet out;
  ASSERT_EQ(decode(good, &out), DecodeError::kNone);
  // Every shorter length, read from an exact-size heap copy (ASan sees any overread).
  for (size_t n = 0; n < 12 + 16 + 4; ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + long(n));
    EXPECT_EQ(decode(cut, &out), DecodeError::kTruncated) << n;
  }
  auto with = [&](size_t at, uint8_t v) {
    std::vector<uint8_t> b = good;
    b[at] = v;
    return decode(b, &out);
  };
  EXPECT_EQ(with(0, 0x15), DecodeError::kUnknownOpcode);  // reserved
  EXPECT_EQ(with(0, 0x40), DecodeError::kUnknownOpcode);  // RD
  EXPECT_EQ(with(0, opcode(Service::kUc, kReadRequest)), DecodeError::kUnknownOpcode);
  EXPECT_EQ(with(0, 0xe0), DecodeError::kUnknownOpcode);  // manufacturer
  EXPECT_EQ(with(0, kCnpOpcode), DecodeError::kCnp);
  EXPECT_EQ(with(1, 0x01), DecodeError::kBadVersion);
  EXPECT_EQ(with(1, 0x30), DecodeError::kNone);  // PadCnt 3 of 8 bytes: payload 5
  ASSERT_EQ(decode(good, &out), DecodeError::kNone);
  // An ACK with a payload, a reserved syndrome, a body that is not 4-aligned.
  Packet ack = full_packet(opcode(Service::kRc, kAcknowledge), {});
  ack.syndrome = syndrome_ack(3);
  std::vector<uint8_t> a(encoded_size(ack) + 4 + kIcrcBytes);
  ASSERT_NE(encode(ack, a.data(), a.size()), 0u);
  EXPECT_EQ(decode(a, &out), DecodeError::kBadPayload);
  a.resize(a.size() - 4);
  EXPECT_EQ(decode(a, &out), DecodeError::kNone);
  a[12] = 0x41;
  EXPECT_EQ(decode(a, &out), DecodeError::kBadSyndrome);
  std::vector<uint8_t> odd = good;
  odd.push_back(0);
  EXPECT_EQ(decode(odd, &out), DecodeError::kBadPadding);
}

TEST(WireIcrc, ResidueAndMaskedFields) {
  // A CRC-32 over data followed by its own little-endian CRC leaves the fixed residue.
  uint8_t ip[20] = {0x45, 0x00, 0x00, 0x3c, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2};
  uint8_t udp[8] = {0xc0, 0x00, 0x12, 0xb7, 0x00, 0x28, 0, 0};
  uint8_t ib[32] = {0x04, 0, 0xff, 0xff, 0, 0, 0, 0x11, 0x80, 0, 0, 1};
  const uint32_t c = icrc(ip, udp, std::span<const uint8_t>(ib, 28));
  // Fields outside the ICRC do not change it...
  uint8_t ip2[20];
  memcpy(ip2, ip, 20);
  ip2[1] = 0xb8;   // TOS
  ip2[8] = 1;      // TTL
  ip2[10] = 0x12;  // checksum
  uint8_t udp2[8];
  memcpy(udp2, udp, 8);
  udp2[6] = 0x34;  // UDP checksum
  uint8_t ib2[32];
  memcpy(ib2, ib, 32);
  ib2[4] = 0xc0;  // FECN/BECN
  EXPECT_EQ(icrc(ip2, udp2, std::span<const uint8_t>(ib2, 28)), c);
  // ...and every other byte does.
  ip2[4] = 1;  // IP identification
  EXPECT_NE(icrc(ip2, udp2, std::span<const uint8_t>(ib2, 28)), c);
  ib2[27] ^= 1;
  EXPECT_NE(icrc(ip, udp, std::span<const uint8_t>(ib2, 28)), c);
  put_icrc(ib + 28, c);
  EXPECT_EQ(get_icrc(ib + 28), c);
  EXPECT_EQ(ib[28], uint8_t(c));  // least significant byte first
}

/// A packet's ib span of random bytes and its headers: the ICRC it would
/// carry with IP identification `id`.
struct IdSample {
  std::vector<uint8_t> ib;
  Ipv4UdpFields f;
  IdSample(size_t len, std::mt19937& rng, uint16_t sport) : ib(len) {
    for (auto& x : ib) x = uint8_t(rng());
    f.src = 0x0100000a;
    f.dst = 0x0200000a;
    f.sport = sport;
  }
  uint32_t icrc_with(uint16_t id) {
    f.id = id;
    uint8_t ip[20], udp[8];
    build_ipv4_udp(f, ib.size() + kIcrcBytes, nullptr, ip, udp);
    return icrc(ip, udp, ib);
  }
};

TEST(WireIcrc, AnyIdentificationSolved) {
  // Every identification a connected socket may use (sampled): solved from
  // the ICRC alone, never for a corrupted packet.
  std::mt19937 rng(11);
  Ipv4Icrc fast;
  for (size_t len : {16u, 28u, 44u, 300u, 1040u, 4112u, 4124u}) {
    IdSample pk(len, rng, 0xc321);
    const Ipv4Icrc::Flow flow{pk.f.src, pk.f.dst, pk.f.sport, pk.f.dport};
    int wrong = 0, corrupted_passed = 0;
    for (uint32_t id = 0; id < 65536; id += (id < 300 ? 1 : 97)) {
      const uint32_t carried = pk.icrc_with(uint16_t(id));
      if (fast.solve(flow, pk.ib, carried) != int(id)) ++wrong;
      if (id % 16 == 0) {
        pk.ib[len / 2] ^= 0x10;
        if (fast.solve(flow, pk.ib, carried) >= 0) ++corrupted_passed;
        pk.ib[len / 2] ^= 0x10;
      }
    }
    EXPECT_EQ(fast.solve(flow, pk.ib, pk.icrc_with(0xffff)), 0xffff) << len;
    EXPECT_EQ(wrong, 0) << len;
    EXPECT_EQ(corrupted_passed, 0) << len;
  }
}

TEST(WireIcrc, PerFlowIcrcEqualsTheOneOverBuiltHeaders) {
  // Ipv4Icrc keeps a CRC state per (flow, length) and adds the
  // identification by linearity: the same ICRC as icrc() over the headers,
  // for several flows and lengths interleaved (more keys than it keeps),
  // and solve() finds the identification back.
  std::mt19937 rng(5);
  Ipv4Icrc fast;
  for (int round = 0; round < 3; ++round)
    for (size_t len : {16u, 28u, 44u, 300u, 4124u, 5000u}) {
      for (uint16_t sport : {0xc001, 0xd00d}) {
        IdSample pk(len, rng, sport);
        const Ipv4Icrc::Flow flow{pk.f.src, pk.f.dst, pk.f.sport, pk.f.dport};
        for (uint16_t id : {0, 1, 63, 0x1234, 0xffff}) {
          const uint32_t want = pk.icrc_with(id);
          EXPECT_EQ(fast.compute(flow, id, pk.ib), want) << len << " " << id;
          EXPECT_EQ(fast.solve(flow, pk.ib, want), int(id)) << len << " " << id;
          // Another flow's ICRC or a corrupted byte: no identification.
          const Ipv4Icrc::Flow other{pk.f.src, pk.f.dst, uint16_t(sport + 1), pk.f.dport};
          EXPECT_NE(fast.compute(other, id, pk.ib), want);
          pk.ib[len - 1] ^= 0x40;
          EXPECT_EQ(fast.solve(flow, pk.ib, want), -1) << len << " " << id;
          pk.ib[len - 1] ^= 0x40;
        }
      }
    }
}

// A CNP as a ConnectX-4 Lx sends it (the capture in ../shared/wire:
// 10.0.17.1 -> 10.0.18.1, destination QP 0x118): the same 28 bytes after
// the UDP header, and the ICRC the NIC computed over them.
TEST(WireCnp, EncodesAsANicSendsIt) {
  const uint8_t ip[20] = {0x45, 0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11,
                          0x91, 0x61, 0x0a, 0x00, 0x11, 0x01, 0x0a, 0x00, 0x12, 0x01};
  const uint8_t udp[8] = {0x00, 0x00, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00};
  const uint8_t nic[28] = {0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0, 0, 0, 0, 0, 0,
                           0,    0,    0,    0,    0,    0,    0,    0,    0, 0, 0, 0, 0, 0};
  const uint8_t nic_icrc[4] = {0x82, 0xfd, 0x00, 0x2a};
  Packet p = cnp(0x118, 0xffff);
  ASSERT_EQ(encoded_size(p), sizeof(nic));
  std::vector<uint8_t> b(sizeof(nic) + kIcrcBytes);
  ASSERT_EQ(encode(p, b.data(), b.size()), sizeof(nic));
  EXPECT_EQ(0, memcmp(b.data(), nic, sizeof(nic)));
  memcpy(b.data() + sizeof(nic), nic_icrc, 4);
  EXPECT_EQ(icrc(ip, udp, {b.data(), sizeof(nic)}), get_icrc(b.data() + sizeof(nic)));
  // Decoded: recognised as a CNP, its BTH read.
  Packet out;
  EXPECT_EQ(decode(b, &out), DecodeError::kCnp);
  EXPECT_EQ(out.bth.dest_qp, 0x118u);
  EXPECT_EQ(out.bth.resv8a & kBecn, kBecn);
}

}  // namespace
}  // namespace uroce::wire
