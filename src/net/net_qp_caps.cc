// The capability exchange of a connected QP (wire/caps_mad.h): its
// requester asks the peer QP whether the peer's responder keeps packets
// that arrive past a gap, and resends only the gap if it does (selective
// repeat, docs/congestion.md); its responder answers the peer's query.
// Kernel rxe and hardware drop the query unread (a UD packet for an RC QP),
// never answer, and keep being spoken to as IBTA says: go-back-N.
#include <span>

#include "memory/trace.h"
#include "net/net_engine.h"
#include "net/net_qp.h"
#include "wire/caps_mad.h"
#include "wire/opcodes.h"

namespace uroce::core {

namespace {

wire::Packet caps_packet(uint32_t dest_qp, uint32_t src_qp, std::span<const uint8_t> mad) {
  wire::Packet p;
  p.bth.opcode = wire::opcode(wire::Service::kUd, wire::kSendOnly);
  p.bth.dest_qp = dest_qp;
  p.qkey = wire::cm::kGsiQkey;
  p.src_qp = src_qp;
  p.payload = mad;
  return p;
}

}  // namespace

void NetQp::ask_caps() {
  ++caps_queries_;
  caps_naks_ = req_->stats().seq_naks;
  uint8_t mad[wire::cm::kMadSize];
  wire::caps::encode(wire::caps::Caps{false, (uint64_t(qpn_) << 32) | caps_queries_, 0}, mad);
  wire::Packet p = caps_packet(peer_qpn_, qpn_, mad);
  if (counters_) ++counters_->req.caps_asked;
  if (tracing()) trace_packet(qpn_, true, p);
  transmit(p);
}

void NetQp::maybe_ask_caps() {
  if (!req_ || caps_known_ || caps_queries_ >= kMaxCapsQueries || !NetEngine::get().settings().selective)
    return;
  // The first packet from the peer: it is in RTR at least, and answers (a
  // query sent at our RTS could have reached it before its RTR, and been
  // lost). Later, a loss while no answer came: that is when it matters.
  if (!caps_peer_seen_ || req_->stats().seq_naks != caps_naks_) {
    caps_peer_seen_ = true;
    ask_caps();
  }
}

void NetQp::on_caps(const wire::Packet& p) {
  wire::caps::Caps c;
  const bool ours = (p.bth.opcode & 0x1f) == wire::kSendOnly && p.qkey == wire::cm::kGsiQkey &&
                    p.src_qp == peer_qpn_ && wire::caps::decode(p.payload, &c);
  if (!ours) return;  // a UD packet for a connected QP: nothing it can take
  if (!c.reply) {
    if (!rc_resp_) return;  // no responder here to speak of (an XRC initiator)
    const bool keeps = NetEngine::get().settings().selective;
    uint8_t mad[wire::cm::kMadSize];
    wire::caps::encode(wire::caps::Caps{true, c.tid, keeps ? wire::caps::kKeepsOutOfOrder : 0u}, mad);
    wire::Packet r = caps_packet(peer_qpn_, qpn_, mad);
    if (counters_) ++counters_->resp.caps_answered;
    if (tracing()) trace_packet(qpn_, true, r);
    transmit(r);
    return;
  }
  if (!req_ || caps_known_ || (c.tid >> 32) != qpn_) return;
  caps_known_ = true;
  const bool keeps = (c.flags & wire::caps::kKeepsOutOfOrder) && NetEngine::get().settings().selective;
  req_->set_selective(keeps);
  if (keeps && counters_) ++counters_->req.caps_selective;
}

}  // namespace uroce::core
