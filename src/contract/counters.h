// What a QP's network link did, counted where uroced and `uroce stat` can
// read it: a block in the owner's segment (QpShm::counters_off), written only
// by the owner, with the same stores the link and the protocol machines made
// into their own members before (common/counted.h), so counting costs the
// fast path nothing more. A QP's block is added to its context's retired
// block (SegHeader::counters_off) when the QP goes, and uroced adds a
// context's blocks to its device's totals when the context goes, so a
// device's counters cover every QP it ever had while uroced runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "link/fault_injector.h"
#include "link/id_trust.h"
#include "link/udp_link.h"
#include "link/xdp_link.h"
#include "transport/rc_requester.h"
#include "transport/rc_responder.h"
#include "transport/uc_responder.h"
#include "transport/ud_responder.h"

namespace uroce::core {

/// A RAW_PACKET QP's frames (it has no network link): its engine counts
/// what it sends, under its lock; the process's raw switch counts what it
/// delivers, with atomic adds (count_add: deliveries to one QP may come
/// from several threads at once, through its work queues' locks).
struct RawCounters {
  uint64_t sent = 0, sent_bytes = 0;
  uint64_t send_waits = 0;  // frames that met a full AF_XDP send ring and waited
  uint64_t received = 0, received_bytes = 0;
  uint64_t dropped = 0;  // steered to it with its receive queue empty, or not receiving
};

/// Adds `n` to a counter others read while it is written.
inline void count_add(uint64_t* c, uint64_t n) { __atomic_fetch_add(c, n, __ATOMIC_RELAXED); }

struct NetCounters {
  static constexpr uint64_t kMagic = 0x38544e4345434f52ull;  // "ROCECNT8"
  uint64_t magic;
  /// The QP's sockets: its sending ones count what they send, its
  /// receiving ones what they receive (each field has one writer).
  link::UdpEndpoint::Stats udp;
  link::XdpPort::QpStats xdp;  // its frames through the process's AF_XDP port
  link::IdTrust::Stats id;
  link::FaultInjector::Stats faults;  // what UROCE_FAULTS did to what it sent
  transport::RequesterStats req;
  transport::CongestionStats cc;
  transport::CongestionGauges cc_now;  // gauges: not added up (CounterField::gauge)
  transport::NotifyStats np;           // CE marks on its requests, the CNPs they earned
  transport::ResponderStats resp;
  transport::UcStats uc;
  transport::UdStats ud;
  RawCounters raw;
};
static_assert(std::is_standard_layout_v<NetCounters> && sizeof(NetCounters) % 8 == 0);

/// A counter's name (as `uroce stat` prints it) and place.
struct CounterField {
  std::string_view name;
  size_t offset;
  /// A value of one QP now (a window, a round trip), not a count: device
  /// totals leave it out.
  bool gauge = false;
};
/// Every counter of a NetCounters, in print order.
std::span<const CounterField> net_counter_fields();

inline uint64_t counter_at(const NetCounters& c, const CounterField& f) {
  uint64_t v;
  __builtin_memcpy(&v, reinterpret_cast<const char*>(&c) + f.offset, 8);
  return v;
}
/// into += from, counter by counter (gauges: left as they are).
void add_counters(NetCounters* into, const NetCounters& from);

}  // namespace uroce::core
