// The responder of a UC QP on a packet link (IBA Vol. 1 9.7.5 as it applies
// to unreliable connections, 9.8.3 for the service): nothing is ever
// acknowledged or NAKed. Packets must arrive with consecutive PSNs; a gap
// (lost, reordered, duplicated packet) drops the message in progress and
// every packet until one that starts a message (FIRST or ONLY), which is
// accepted whatever its PSN and resynchronizes the expected PSN. A dropped
// SEND completes nothing: its receive WQE is kept and the next SEND fills it
// from the start. A request the responder cannot execute (bad R_Key, wrong
// length, no receive WQE) is dropped the same way; a SEND longer than the
// receive buffers completes the receive in error and the QP goes to ERR.
// Pure: behind ResponderEnv, like RcResponder.
#pragma once

#include <cstdint>

#include "common/counted.h"
#include "transport/rc_responder.h"

namespace uroce::transport {

struct UcStats {
  uint64_t packets = 0, messages = 0, dropped_messages = 0, dropped_packets = 0, no_recv = 0;
};

class UcResponder {
 public:
  UcResponder(const ResponderConfig& cfg, ResponderEnv* env) : cfg_(cfg), env_(env), epsn_(cfg.epsn) {}
  void on_request(const wire::Packet& p);
  uint32_t epsn() const { return epsn_; }
  bool failed() const { return failed_; }
  const UcStats& stats() const { return stats_.get(); }
  /// Counts from now on into `s` (contract/counters.h).
  void count_into(UcStats* s) { stats_.use(s); }

 private:
  /// Gives up the message in progress (a kept receive WQE is reused).
  void abandon();
  void do_send(const wire::Packet& p, const wire::OpInfo& info);
  void do_write(const wire::Packet& p, const wire::OpInfo& info);

  ResponderConfig cfg_;
  ResponderEnv* env_;
  uint32_t epsn_;
  uint8_t prev_op_ = kNoPrev;
  bool dropping_ = false;  // skipping packets until a message starts
  bool failed_ = false;
  bool have_recv_ = false;  // recv_ is claimed (possibly kept from a dropped SEND)
  RecvTarget recv_{};
  uint64_t recv_offset_ = 0;
  uint64_t write_left_ = 0;
  uint32_t write_len_ = 0;  // the WRITE in progress: its DMA length
  uint8_t* write_at_ = nullptr;
  Counted<UcStats> stats_;
};

}  // namespace uroce::transport
