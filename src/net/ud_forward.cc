#include "net/ud_forward.h"

#include <sys/uio.h>

#include "memory/peer_map.h"
#include "memory/target.h"
#include "wire/grh.h"
#include "wire/ip_udp.h"
#include "wire/opcodes.h"

namespace uroce::core {

void ud_grh(const wire::Packet& p, const link::UdpAddr& from, const link::UdpAddr& to,
            uint8_t grh[wire::kGrhBytes]) {
  const size_t len = wire::encoded_size(p) + wire::kIcrcBytes;
  if (!from.ip.is_v4()) {
    // The hop limit as sent (a datagram socket does not see what arrived).
    wire::grh_ipv6(0, 0, uint16_t(wire::kUdpHeaderBytes + len), 64, from.ip.b, to.ip.b, grh);
    return;
  }
  wire::Ipv4UdpFields f;
  f.src = from.ip.ip4();
  f.dst = to.ip.ip4();
  f.sport = from.port;
  uint8_t ip[20], udp[8];
  wire::build_ipv4_udp(f, len, nullptr, ip, udp);
  wire::grh_from_ipv4(ip, grh);
}

UdForward forward_ud(const wire::Packet& p, const link::UdpAddr& from, const link::UdpAddr& to) {
  const uint8_t op = p.bth.opcode & 0x1f;
  if ((p.bth.opcode >> 5) != uint8_t(wire::Service::kUd) ||
      (op != wire::kSendOnly && op != wire::kSendOnlyImm))
    return UdForward::kNotUd;
  auto r = core::PeerMap::get().resolve(p.bth.dest_qp);
  if (!r.is_ok()) return UdForward::kNoSuchQp;
  const core::PeerQp& t = r.value();
  if (t.qp->qp_type != uint32_t(core::QpType::kUd)) return UdForward::kNoSuchQp;
  if (p.qkey != t.qp->qkey) return UdForward::kBadQkey;  // IBA C10-15
  uint8_t grh[wire::kGrhBytes];
  ud_grh(p, from, to, grh);
  RecvMeta m{};
  m.src_qpn = p.src_qp;
  m.has_imm = op == wire::kSendOnlyImm;
  m.imm = p.imm;
  m.solicited = p.bth.solicited;
  m.with_grh = true;
  m.grh = grh;
  iovec src{const_cast<uint8_t*>(p.payload.data()), p.payload.size()};
  RnrInfo rnr;  // UD has no RNR: without a receive WQE the datagram is lost
  return respond_send(t, &src, 1, p.payload.size(), m, &rnr) == Resp::kOk ? UdForward::kDelivered
                                                                          : UdForward::kDropped;
}

}  // namespace uroce::core
