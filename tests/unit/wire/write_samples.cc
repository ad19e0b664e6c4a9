// Writes one RoCE v2 frame per opcode and service the codec knows (RC, UC,
// UD, XRC; path MTU 256) to a pcap file, built only with src/wire, so the
// independent checker (../shared/wire/roce_check.py) and tshark can judge
// the codec's bytes: headers, pad, lengths and ICRC.
//   wire_write_samples OUT.pcap [RAW_DIR]
// With RAW_DIR, each frame's UDP payload (BTH .. ICRC) also goes to a file
// there: the seed corpus of the wire_decode fuzz target. With
// UROCE_SAMPLES_NO_XRC=1 the XRC frames are left out (tshark 4.0 does not
// know XRC opcodes).
#include <arpa/inet.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "wire/icrc.h"
#include "wire/ip_udp.h"
#include "wire/opcodes.h"
#include "wire/packet.h"
#include "wire/pcap_writer.h"

using namespace uroce::wire;

namespace {

constexpr uint32_t kPmtu = 256;
constexpr uint32_t kLastLen = 101, kOnlyLen = 33;
constexpr uint32_t kThreePackets = 2 * kPmtu + kLastLen;

/// One packet of a sample conversation: opcode (low bits), who sends it, its
/// PSN, and for a RETH the DMA length.
struct Step {
  Op op;
  bool response;  // responder -> requester
  uint32_t psn;
  uint32_t dma_len = 0;
};

/// Messages in a valid order on one connection (requests PSN 100..122) and
/// the responses that go with them: every opcode of RC and XRC.
const Step kConversation[] = {
    {kSendFirst, false, 100},
    {kSendMiddle, false, 101},
    {kSendLast, false, 102},
    {kSendFirst, false, 103},
    {kSendLastImm, false, 104},
    {kSendOnly, false, 105},
    {kSendOnlyImm, false, 106},
    {kWriteFirst, false, 107, kThreePackets},
    {kWriteMiddle, false, 108},
    {kWriteLast, false, 109},
    {kWriteFirst, false, 110, kPmtu + kLastLen},
    {kWriteLastImm, false, 111},
    {kWriteOnly, false, 112, kOnlyLen},
    {kWriteOnlyImm, false, 113, kOnlyLen},
    {kAcknowledge, true, 113},
    {kReadRequest, false, 114, kThreePackets},
    {kReadResponseFirst, true, 114},
    {kReadResponseMiddle, true, 115},
    {kReadResponseLast, true, 116},
    {kReadRequest, false, 117, kOnlyLen},
    {kReadResponseOnly, true, 117},
    {kCompareSwap, false, 118},
    {kAtomicAcknowledge, true, 118},
    {kFetchAdd, false, 119},
    {kAtomicAcknowledge, true, 119},
    {kSendFirst, false, 120},
    {kSendLastInv, false, 121},
    {kSendOnlyInv, false, 122},
    {kAcknowledge, true, 122},
};

uint32_t payload_len(const OpInfo& i) {
  switch (i.payload) {
    case Payload::kNone:
      return 0;
    case Payload::kFull:
      return kPmtu;
    case Payload::kLast:
      return kLastLen;
    case Payload::kOnly:
      return kOnlyLen;
    case Payload::kEight:
      return 8;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: %s OUT.pcap [RAW_DIR]\n", argv[0]);
    return 2;
  }
  auto out = PcapWriter::open(argv[1]);
  if (!out.is_ok()) {
    fprintf(stderr, "%s: %s\n", argv[1], strerror(out.err()));
    return 1;
  }
  std::vector<uint8_t> data(kPmtu);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 7 + 3);
  uint32_t frames = 0;
  auto emit = [&](Service s, const Step& st, uint32_t qp_base) {
    const uint8_t opc = opcode(s, st.op);
    const OpInfo* info = op_info(opc);
    if (!info) return true;  // not defined for this service
    Packet p;
    p.bth.opcode = opc;
    p.bth.dest_qp = st.response ? qp_base + 0x10 : qp_base;  // requester's QP gets the responses
    p.bth.psn = st.psn;
    const bool ends = info->flags & (kLast | kOnly);
    p.bth.ack_req = !st.response && ends && s != Service::kUc && s != Service::kUd;
    p.bth.solicited = (info->flags & kSendOp) && ends;
    const uint32_t len = payload_len(*info);
    p.payload = std::span<const uint8_t>(data.data(), len);
    p.va = 0x7f0000001000ull;
    p.rkey = 0x1234;
    p.dma_len = st.dma_len;
    p.swap_add = 5;
    p.syndrome = syndrome_ack(kCreditsInvalid);
    p.msn = 7;
    p.atomic_orig = 42;
    p.imm = htonl(0xc0ffee);
    p.inv_rkey = 0x1234;
    p.qkey = 0x11111111;
    p.src_qp = qp_base + 0x10;
    p.xrc_srqn = 0x000044;
    uint8_t frame[20 + 8 + 4096];
    uint8_t* ib = frame + 20 + 8;
    const size_t n = encode(p, ib, sizeof(frame) - 20 - 8 - kIcrcBytes);
    if (!n) return false;
    Ipv4UdpFields f;
    f.src = htonl(st.response ? 0x0a000002 : 0x0a000001);
    f.dst = htonl(st.response ? 0x0a000001 : 0x0a000002);
    f.sport = uint16_t(0xc000 | (p.bth.dest_qp & 0x3fff));
    uint8_t* ip = frame;
    uint8_t* udp = ip + 20;
    build_ipv4_udp(f, n + kIcrcBytes, nullptr, ip, udp);
    put_icrc(ib + n, icrc({ip, 20}, {udp, 8}, {ib, n}));
    build_ipv4_udp(f, n + kIcrcBytes, ib, ip, udp);  // now with the UDP checksum over the final bytes
    out.value()->write({frame, 28}, {ib, n + kIcrcBytes}, 1700000000ull * 1000000000ull + frames * 1000ull,
                       !st.response);
    if (argc == 3) {
      char name[512];
      snprintf(name, sizeof(name), "%s/%02u-%s", argv[2], frames, info->name);
      FILE* f = fopen(name, "wb");
      if (!f || fwrite(ib, 1, n + kIcrcBytes, f) != n + kIcrcBytes) return false;
      fclose(f);
    }
    ++frames;
    return true;
  };
  uint32_t qp = 0x20;
  const char* no_xrc = getenv("UROCE_SAMPLES_NO_XRC");
  for (Service s : {Service::kRc, Service::kUc, Service::kXrc}) {
    if (s == Service::kXrc && no_xrc && strcmp(no_xrc, "1") == 0) continue;
    for (const Step& st : kConversation) {
      // UC has no READ, atomics, ACKs or SEND with invalidate: its part ends at PSN 113.
      if (s == Service::kUc && (st.response || st.psn > 113)) continue;
      if (!emit(s, st, qp)) return 1;
    }
    qp += 0x100;
  }
  // UD: the two opcodes it has, each a whole message.
  if (!emit(Service::kUd, Step{kSendOnly, false, 1}, qp) ||
      !emit(Service::kUd, Step{kSendOnlyImm, false, 2}, qp))
    return 1;
  out.value().reset();  // closes the file
  printf("%u frames\n", frames);
  return 0;
}
