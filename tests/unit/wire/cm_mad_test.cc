// The CM's MADs (wire/cm_mad.h): every field survives encode and decode, a
// few land on the bytes the IBTA tables give (the rest is judged by
// Wireshark: check_cm_samples_tshark.sh), and decode refuses what is not a
// CM message of the expected kind.
#include "wire/cm_mad.h"

#include <gtest/gtest.h>

#include <cstring>

namespace uroce::wire::cm {
namespace {

/// A round trip: decoding the encoding and encoding that again gives the
/// same bytes (so no field is lost or moved; structs have padding, so they
/// are not compared with memcmp).
template <typename M>
bool round_trips(const M& m) {
  MadHeader h;
  h.tid = 42;
  uint8_t a[kMadSize], b[kMadSize];
  encode(h, m, a);
  M d;
  if (!decode(a, &d)) return false;
  encode(h, d, b);
  return memcmp(a, b, kMadSize) == 0;
}

TEST(CmMad, ReqRoundTripsAndItsBitFieldsSitWhereTheTableSays) {
  MadHeader h;
  h.tid = 0x0123456789abcdefull;
  h.attr_mod = 0x55;
  Req r;
  r.local_comm_id = 0xdeadbeef;
  r.service_id = service_id(0x0106, 7471);
  r.local_ca_guid = 0x1122334455667788ull;
  r.local_qkey = 0x01234567;
  r.local_qpn = 0xabcdef;
  r.responder_resources = 16;
  r.local_eecn = 0x123;
  r.initiator_depth = 8;
  r.remote_cm_response_timeout = 0x1f;
  r.transport_type = 1;
  r.end_to_end_flow_control = true;
  r.starting_psn = 0x765432;
  r.local_cm_response_timeout = 0x11;
  r.retry_count = 5;
  r.pkey = 0x8001;
  r.path_mtu = 5;
  r.rdc_exists = true;
  r.rnr_retry_count = 3;
  r.max_cm_retries = 9;
  r.srq = true;
  r.extended_transport_type = 1;
  r.primary_local_lid = 0x1234;
  r.primary_remote_lid = 0x5678;
  for (int i = 0; i < 16; ++i) {
    r.primary_local_gid[i] = uint8_t(i);
    r.primary_remote_gid[i] = uint8_t(0xf0 + i);
  }
  r.primary_flow_label = 0xfedcb;
  r.primary_packet_rate = 0x2a;
  r.primary_traffic_class = 0x88;
  r.primary_hop_limit = 0xfe;
  r.primary_sl = 0xd;
  r.primary_subnet_local = true;
  r.primary_local_ack_timeout = 0x16;
  for (size_t i = 0; i < kReqPrivate; ++i) r.private_data[i] = uint8_t(i * 3);

  uint8_t mad[kMadSize];
  encode(h, r, mad);
  // Header and a few bytes, by hand from the tables (message at byte 24).
  EXPECT_EQ(mad[0], 1);
  EXPECT_EQ(mad[1], 0x07);
  EXPECT_EQ(mad[2], 2);
  EXPECT_EQ(mad[3], 0x03);
  EXPECT_EQ(mad[16], 0x00);
  EXPECT_EQ(mad[17], 0x10);
  EXPECT_EQ(mad[24 + 32], 0xab);                             // local QPN, high byte
  EXPECT_EQ(mad[24 + 43], uint8_t(0x1f << 3 | 1 << 1 | 1));  // timeout | transport | E2E
  EXPECT_EQ(mad[24 + 47], uint8_t(0x11 << 3 | 5));           // local timeout | retry count
  EXPECT_EQ(mad[24 + 50], uint8_t(5 << 4 | 1 << 3 | 3));     // MTU | RDC | RNR retry
  EXPECT_EQ(mad[24 + 51], uint8_t(9 << 4 | 1 << 3 | 1));     // max CM retries | SRQ | ext. transport
  EXPECT_EQ(mad[24 + 91] & 0x3f, 0x2a);                      // packet rate
  EXPECT_EQ(mad[24 + 140], 0);                               // private data starts here
  EXPECT_EQ(mad[24 + 141], 3);

  MadHeader hd;
  ASSERT_TRUE(decode_header(mad, &hd));
  EXPECT_EQ(hd.tid, h.tid);
  EXPECT_EQ(hd.attr_id, uint16_t(Attr::kReq));
  EXPECT_EQ(hd.attr_mod, 0x55u);
  Req d;
  ASSERT_TRUE(decode(mad, &d));
  EXPECT_TRUE(round_trips(r));
  EXPECT_EQ(d.local_qpn, 0xabcdefu);
  EXPECT_EQ(d.starting_psn, 0x765432u);
  EXPECT_EQ(d.primary_flow_label, 0xfedcbu);
  EXPECT_EQ(d.primary_local_ack_timeout, 0x16);
  EXPECT_EQ(memcmp(d.private_data, r.private_data, kReqPrivate), 0);
  Rep wrong;
  EXPECT_FALSE(decode(mad, &wrong));  // a REQ is not a REP
}

TEST(CmMad, EveryOtherMessageRoundTrips) {
  Rep rep;
  rep.local_comm_id = 1;
  rep.remote_comm_id = 2;
  rep.local_qkey = 3;
  rep.local_qpn = 0xfffffe;
  rep.starting_psn = 0x800001;
  rep.responder_resources = 7;
  rep.initiator_depth = 6;
  rep.target_ack_delay = 31;
  rep.failover_accepted = 2;
  rep.end_to_end_flow_control = true;
  rep.rnr_retry_count = 7;
  rep.srq = true;
  rep.local_ca_guid = ~0ull;
  memset(rep.private_data, 0x5a, sizeof(rep.private_data));
  EXPECT_TRUE(round_trips(rep)) << "Rep";

  Rej rej;
  rej.local_comm_id = 9;
  rej.message_rejected = 1;
  rej.reject_info_length = 72;
  rej.reason = 28;
  memset(rej.ari, 1, sizeof(rej.ari));
  memset(rej.private_data, 2, sizeof(rej.private_data));
  EXPECT_TRUE(round_trips(rej)) << "Rej";

  Mra mra;
  mra.message_mraed = 1;
  mra.service_timeout = 24;
  EXPECT_TRUE(round_trips(mra)) << "Mra";

  Dreq dreq;
  dreq.remote_qpn = 0x123456;
  dreq.private_data[219] = 7;
  EXPECT_TRUE(round_trips(dreq)) << "Dreq";

  Rtu rtu;
  rtu.private_data[223] = 1;
  EXPECT_TRUE(round_trips(rtu)) << "Rtu";

  Drep drep;
  drep.local_comm_id = 77;
  EXPECT_TRUE(round_trips(drep)) << "Drep";

  SidrReq sreq;
  sreq.request_id = 5;
  sreq.pkey = 0x7fff;
  sreq.service_id = service_id(0x0111, 1);
  sreq.private_data[215] = 9;
  EXPECT_TRUE(round_trips(sreq)) << "SidrReq";

  SidrRep srep;
  srep.request_id = 5;
  srep.status = 2;
  srep.additional_info_length = 4;
  srep.qpn = 0xabc;
  srep.service_id = 42;
  srep.qkey = 0x01234567;
  srep.private_data[135] = 1;
  EXPECT_TRUE(round_trips(srep)) << "SidrRep";
}

TEST(CmMad, DecodeRefusesWhatIsNotACmMessage) {
  MadHeader h;
  uint8_t mad[kMadSize];
  encode(h, Rtu{}, mad);
  MadHeader d;
  EXPECT_FALSE(decode_header(std::span<const uint8_t>(mad, kMadSize - 1), &d));  // short
  for (int byte : {0, 1, 2, 3}) {  // base version, class, class version, method
    uint8_t bad[kMadSize];
    memcpy(bad, mad, kMadSize);
    bad[byte] ^= 0x40;
    EXPECT_FALSE(decode_header(bad, &d)) << byte;
    Rtu r;
    EXPECT_FALSE(decode(bad, &r)) << byte;
  }
}

TEST(CmMad, TheRdmaCmHeader) {
  CmaHeader h;
  h.ip_version = 6;
  h.port = 0xbeef;
  for (int i = 0; i < 16; ++i) {
    h.src[i] = uint8_t(i);
    h.dst[i] = uint8_t(16 + i);
  }
  uint8_t b[CmaHeader::kSize];
  encode(h, b);
  EXPECT_EQ(b[0], 0);
  EXPECT_EQ(b[1], 0x60);
  EXPECT_EQ(b[2], 0xbe);
  EXPECT_EQ(b[4], 0);
  EXPECT_EQ(b[20], 16);
  CmaHeader d;
  ASSERT_TRUE(decode(b, &d));
  EXPECT_EQ(memcmp(&d, &h, sizeof(h)), 0);
  b[1] = 0x50;  // IP version 5
  EXPECT_FALSE(decode(b, &d));
  EXPECT_EQ(service_id(0x0106, 7471), 0x01061d2fu);
}

}  // namespace
}  // namespace uroce::wire::cm
