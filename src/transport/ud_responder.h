// The receive side of a UD QP on a packet link (IBA Vol. 1 9.7.5 for UD,
// 10.2.5 for Q_Keys): one SEND_ONLY(_WITH_IMMEDIATE) per message, no ACKs,
// no PSN checks. A packet with the wrong Q_Key, or arriving when no
// receive WQE is posted, is dropped silently and counted; an accepted one
// lands behind the 40-byte GRH of the packet it came in (wire/grh.h).
#pragma once

#include <cstdint>

#include "common/counted.h"
#include "transport/rc_responder.h"
#include "wire/grh.h"
#include "wire/packet.h"

namespace uroce::transport {

struct UdStats {
  uint64_t delivered = 0, bad_qkey = 0, no_recv = 0, not_ud = 0, too_long = 0;
};

class UdResponder {
 public:
  UdResponder(uint32_t qkey, ResponderEnv* env) : qkey_(qkey), env_(env) {}
  void set_qkey(uint32_t q) { qkey_ = q; }
  /// One packet for this QP, with the GRH of the IP header it arrived with.
  void on_request(const wire::Packet& p, const uint8_t grh[wire::kGrhBytes]);
  const UdStats& stats() const { return stats_.get(); }
  /// Counts from now on into `s` (contract/counters.h).
  void count_into(UdStats* s) { stats_.use(s); }

 private:
  uint32_t qkey_;
  ResponderEnv* env_;
  Counted<UdStats> stats_;
};

}  // namespace uroce::transport
