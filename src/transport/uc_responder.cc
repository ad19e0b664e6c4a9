#include "transport/uc_responder.h"

#include <algorithm>

#include "transport/psn.h"

namespace uroce::transport {

using namespace uroce::wire;

void UcResponder::abandon() {
  if (prev_op_ != kNoPrev || write_left_) ++stats_->dropped_messages;
  recv_offset_ = 0;
  write_left_ = 0;
  write_at_ = nullptr;
  prev_op_ = kNoPrev;
}

void UcResponder::on_request(const Packet& p) {
  if (failed_) {
    ++stats_->dropped_packets;
    return;
  }
  ++stats_->packets;
  const OpInfo* info = op_info(p.bth.opcode);
  if (!info || !(info->flags & kRequest) || (p.bth.opcode >> 5) != uint8_t(Service::kUc)) {
    ++stats_->dropped_packets;
    return;
  }
  const uint8_t op = p.bth.opcode & 0x1f;
  const bool starts = info->flags & (kFirst | kOnly);
  const bool in_order = p.bth.psn == epsn_ && !dropping_ && opcode_follows(prev_op_, op);
  if (!in_order) {
    if (!starts) {
      // Out of sequence inside a message: the whole message is lost.
      if (!dropping_) abandon();
      dropping_ = true;
      ++stats_->dropped_packets;
      return;
    }
    // A message starts: whatever was in progress is given up, and the
    // expected PSN follows this packet.
    if (!dropping_) abandon();
    dropping_ = false;
    prev_op_ = kNoPrev;
  }
  epsn_ = psn_add(p.bth.psn, 1);
  if (info->flags & kSendOp) return do_send(p, *info);
  if (info->flags & kWriteOp) return do_write(p, *info);
  ++stats_->dropped_packets;  // UC has no READ or atomics (Table 38): op_info refuses them already
}

void UcResponder::do_send(const Packet& p, const OpInfo& info) {
  const uint8_t op = p.bth.opcode & 0x1f;
  if (info.flags & (kFirst | kOnly)) {
    if (!have_recv_ && !env_->claim_recv(&recv_)) {
      // No receive WQE: UC has no RNR, the message is silently dropped.
      ++stats_->no_recv;
      ++stats_->dropped_messages;
      dropping_ = true;
      return;
    }
    have_recv_ = true;
    recv_offset_ = 0;
  }
  const Access a = env_->place_recv(recv_, recv_offset_, p.payload);
  if (a != Access::kOk) {
    have_recv_ = false;
    failed_ = true;
    env_->complete_recv(recv_, a == Access::kLengthError ? WcStatus::kLocLenErr : WcStatus::kLocProtErr, 0,
                        {});
    env_->qp_error(a == Access::kLengthError ? AsyncEvent::kQpReqErr : AsyncEvent::kQpAccessErr);
    return;
  }
  recv_offset_ += p.payload.size();
  prev_op_ = op;
  if (info.flags & (kLast | kOnly)) {
    RecvInfo ri;
    ri.has_imm = info.flags & kHasImm;
    ri.imm = p.imm;
    ri.solicited = p.bth.solicited;
    have_recv_ = false;
    prev_op_ = kNoPrev;
    ++stats_->messages;
    env_->complete_recv(recv_, WcStatus::kSuccess, uint32_t(recv_offset_), ri);
    recv_offset_ = 0;
  }
}

void UcResponder::do_write(const Packet& p, const OpInfo& info) {
  const uint8_t op = p.bth.opcode & 0x1f;
  if (info.flags & (kFirst | kOnly)) {
    write_left_ = write_len_ = p.dma_len;
    write_at_ = nullptr;
    if (p.dma_len) {
      write_at_ = env_->remote_memory(p.rkey, p.va, p.dma_len, access::kRemoteWrite);
      if (!write_at_) {  // a bad R_Key on UC: the message is dropped, nothing is answered
        ++stats_->dropped_messages;
        write_left_ = 0;
        dropping_ = true;
        return;
      }
    }
  }
  const bool ends = info.flags & (kLast | kOnly);
  if (p.payload.size() > write_left_ || (ends && p.payload.size() != write_left_)) {
    abandon();
    dropping_ = true;
    return;
  }
  if (!p.payload.empty()) {
    std::copy(p.payload.begin(), p.payload.end(), write_at_);
    write_at_ += p.payload.size();
  }
  write_left_ -= p.payload.size();
  prev_op_ = op;
  if (!ends) return;
  prev_op_ = kNoPrev;
  ++stats_->messages;
  if (!(info.flags & kHasImm)) return;
  // WRITE with immediate consumes a receive WQE (a kept one first).
  if (!have_recv_ && !env_->claim_recv(&recv_)) {
    ++stats_->no_recv;
    return;
  }
  have_recv_ = false;
  RecvInfo ri;
  ri.opcode = WcOpcode::kRecvRdmaWithImm;
  ri.has_imm = true;
  ri.imm = p.imm;
  ri.solicited = p.bth.solicited;
  env_->complete_recv(recv_, WcStatus::kSuccess, write_len_, ri);  // byte_len: the WRITE's length
}

}  // namespace uroce::transport
