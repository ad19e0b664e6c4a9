#include "transport/ud_responder.h"

namespace uroce::transport {

using namespace uroce::wire;

void UdResponder::on_request(const Packet& p, const uint8_t grh[kGrhBytes]) {
  const uint8_t op = p.bth.opcode & 0x1f;
  if ((p.bth.opcode >> 5) != uint8_t(Service::kUd) || (op != kSendOnly && op != kSendOnlyImm)) {
    ++stats_->not_ud;
    return;
  }
  if (p.qkey != qkey_) {  // IBA C10-15: a Q_Key mismatch drops the packet
    ++stats_->bad_qkey;
    return;
  }
  RecvTarget r;
  if (!env_->claim_recv(&r)) {  // UD has no RNR: the message is lost
    ++stats_->no_recv;
    return;
  }
  const uint32_t len = uint32_t(p.payload.size());
  if (env_->place_recv(r, 0, {grh, kGrhBytes}) != Access::kOk ||
      env_->place_recv(r, kGrhBytes, p.payload) != Access::kOk) {
    // Longer than the receive buffers: the receive completes in error and
    // the QP goes to ERR, as the intra-host link does (core/responder).
    ++stats_->too_long;
    env_->complete_recv(r, WcStatus::kLocLenErr, 0, {});
    env_->qp_error(AsyncEvent::kQpReqErr);
    return;
  }
  RecvInfo ri;
  ri.has_imm = op == kSendOnlyImm;
  ri.imm = p.imm;
  ri.src_qp = p.src_qp;
  ri.with_grh = true;
  ri.sl = grh_packet_type(grh);
  ri.solicited = p.bth.solicited;
  ++stats_->delivered;
  env_->complete_recv(r, WcStatus::kSuccess, kGrhBytes + len, ri);
}

}  // namespace uroce::transport
