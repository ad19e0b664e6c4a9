// Writes one RoCE v2 frame per CM message (REQ with the RDMA CM's header in
// its private data, MRA, REJ, REP, RTU, DREQ, DREP, SIDR REQ, SIDR REP), each
// a UD SEND to QP1 with the GSI Q_Key, built only with src/wire, so that
// Wireshark's dissector can judge the layouts (check_cm_samples_tshark.sh
// compares the fields it decodes with the values set here).
//   wire_write_cm_samples OUT.pcap
#include <arpa/inet.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "wire/cm_mad.h"
#include "wire/icrc.h"
#include "wire/ip_udp.h"
#include "wire/packet.h"
#include "wire/pcap_writer.h"

using namespace uroce::wire;
namespace cm = uroce::wire::cm;

namespace {

void v4_gid(uint8_t gid[16], uint32_t ip) {
  memset(gid, 0, 16);
  gid[10] = gid[11] = 0xff;
  const uint32_t be = htonl(ip);
  memcpy(gid + 12, &be, 4);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT.pcap\n", argv[0]);
    return 2;
  }
  auto out = PcapWriter::open(argv[1]);
  if (!out.is_ok()) {
    fprintf(stderr, "%s: %s\n", argv[1], strerror(out.err()));
    return 1;
  }
  uint32_t frames = 0;
  // One MAD as a UD SEND_ONLY from QP1 to QP1 (10.0.0.1 -> 10.0.0.2, or back).
  auto emit = [&](const uint8_t* mad, bool back) {
    Packet p;
    p.bth.opcode = 0x64;  // UD SEND_ONLY
    p.bth.dest_qp = cm::kGsiQpn;
    p.bth.psn = frames;
    p.qkey = cm::kGsiQkey;
    p.src_qp = cm::kGsiQpn;
    p.payload = std::span<const uint8_t>(mad, cm::kMadSize);
    uint8_t frame[20 + 8 + 512];
    uint8_t* ib = frame + 28;
    const size_t n = encode(p, ib, sizeof(frame) - 28 - kIcrcBytes);
    if (!n) return false;
    Ipv4UdpFields f;
    f.src = htonl(back ? 0x0a000002 : 0x0a000001);
    f.dst = htonl(back ? 0x0a000001 : 0x0a000002);
    f.sport = 0xc001;
    build_ipv4_udp(f, n + kIcrcBytes, nullptr, frame, frame + 20);
    put_icrc(ib + n, icrc({frame, 20}, {frame + 20, 8}, {ib, n}));
    build_ipv4_udp(f, n + kIcrcBytes, ib, frame, frame + 20);
    out.value()->write({frame, 28}, {ib, n + kIcrcBytes}, 1700000000ull * 1000000000ull + frames * 1000ull,
                       true);
    ++frames;
    return true;
  };

  uint8_t mad[cm::kMadSize];
  cm::MadHeader h;
  h.tid = 0x0000000a11223344ull;

  cm::Req req;
  req.local_comm_id = 0x11223344;
  req.service_id = cm::service_id(0x0106, 7471);
  req.local_ca_guid = 0x0102030405060708ull;
  req.local_qpn = 0x123456;
  req.responder_resources = 4;
  req.initiator_depth = 3;
  req.remote_cm_response_timeout = 20;
  req.starting_psn = 0xabcdef;
  req.local_cm_response_timeout = 19;
  req.retry_count = 7;
  req.path_mtu = 3;
  req.rnr_retry_count = 6;
  req.max_cm_retries = 15;
  v4_gid(req.primary_local_gid, 0x0a000001);
  v4_gid(req.primary_remote_gid, 0x0a000002);
  req.primary_flow_label = 0x12345;
  req.primary_packet_rate = 3;
  req.primary_hop_limit = 64;
  req.primary_local_ack_timeout = 18;
  cm::CmaHeader ch;
  ch.ip_version = 4;
  ch.port = 0x1234;
  v4_gid(ch.src, 0x0a000001);
  v4_gid(ch.dst, 0x0a000002);
  memset(ch.src, 0, 12);
  memset(ch.dst, 0, 12);
  cm::encode(ch, std::span<uint8_t, cm::CmaHeader::kSize>(req.private_data, cm::CmaHeader::kSize));
  cm::encode(h, req, mad);
  if (!emit(mad, false)) return 1;

  cm::Mra mra;
  mra.local_comm_id = 0x55667788;
  mra.remote_comm_id = 0x11223344;
  mra.service_timeout = 24;
  cm::encode(h, mra, mad);
  if (!emit(mad, true)) return 1;

  cm::Rej rej;
  rej.local_comm_id = 0x55667788;
  rej.remote_comm_id = 0x11223344;
  rej.message_rejected = 0;
  rej.reason = 28;
  cm::encode(h, rej, mad);
  if (!emit(mad, true)) return 1;

  cm::Rep rep;
  rep.local_comm_id = 0x55667788;
  rep.remote_comm_id = 0x11223344;
  rep.local_qpn = 0x654321;
  rep.starting_psn = 0x0fedcb;
  rep.responder_resources = 2;
  rep.initiator_depth = 1;
  rep.target_ack_delay = 17;
  rep.rnr_retry_count = 5;
  rep.srq = true;
  rep.local_ca_guid = 0x0807060504030201ull;
  cm::encode(h, rep, mad);
  if (!emit(mad, true)) return 1;

  cm::Rtu rtu;
  rtu.local_comm_id = 0x11223344;
  rtu.remote_comm_id = 0x55667788;
  cm::encode(h, rtu, mad);
  if (!emit(mad, false)) return 1;

  cm::Dreq dreq;
  dreq.local_comm_id = 0x11223344;
  dreq.remote_comm_id = 0x55667788;
  dreq.remote_qpn = 0x654321;
  cm::encode(h, dreq, mad);
  if (!emit(mad, false)) return 1;

  cm::Drep drep;
  drep.local_comm_id = 0x55667788;
  drep.remote_comm_id = 0x11223344;
  cm::encode(h, drep, mad);
  if (!emit(mad, true)) return 1;

  cm::SidrReq sreq;
  sreq.request_id = 0x99aabbcc;
  sreq.service_id = cm::service_id(0x0111, 7174);
  cm::encode(h, sreq, mad);
  if (!emit(mad, false)) return 1;

  cm::SidrRep srep;
  srep.request_id = 0x99aabbcc;
  srep.qpn = 0x000abc;
  srep.service_id = cm::service_id(0x0111, 7174);
  srep.qkey = 0x01234567;
  cm::encode(h, srep, mad);
  if (!emit(mad, true)) return 1;

  out.value().reset();
  printf("%u frames\n", frames);
  return 0;
}
