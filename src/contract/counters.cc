#include "contract/counters.h"

#include <cstring>

namespace uroce::core {

namespace {

#define UROCE_COUNTER(path) \
  CounterField { #path, offsetof(NetCounters, path) }
#define UROCE_GAUGE(path) \
  CounterField { #path, offsetof(NetCounters, path), true }

constexpr CounterField kFields[] = {
    UROCE_COUNTER(udp.sent),
    UROCE_COUNTER(udp.sent_bytes),
    UROCE_COUNTER(udp.send_errors),
    UROCE_COUNTER(udp.received),
    UROCE_COUNTER(udp.received_bytes),
    UROCE_COUNTER(udp.bad_icrc),
    UROCE_COUNTER(udp.malformed),
    UROCE_COUNTER(udp.cnp),
    UROCE_COUNTER(xdp.sent),
    UROCE_COUNTER(xdp.sent_bytes),
    UROCE_COUNTER(xdp.send_full),
    UROCE_COUNTER(xdp.received),
    UROCE_COUNTER(xdp.received_bytes),
    UROCE_COUNTER(id.parked),
    UROCE_COUNTER(id.vouched),
    UROCE_COUNTER(id.succeeded),
    UROCE_COUNTER(id.unproven),
    UROCE_COUNTER(req.packets),
    UROCE_COUNTER(req.retransmits),
    UROCE_COUNTER(req.timeouts),
    UROCE_COUNTER(req.acks),
    UROCE_COUNTER(req.seq_naks),
    UROCE_COUNTER(req.rnr_naks),
    UROCE_COUNTER(req.error_naks),
    UROCE_COUNTER(req.seq_naks_ignored),
    UROCE_COUNTER(req.seq_naks_rechecked),
    UROCE_COUNTER(req.probes),
    UROCE_COUNTER(req.dropped),
    UROCE_COUNTER(req.resent_packets),
    UROCE_COUNTER(req.resent_bytes),
    UROCE_COUNTER(req.holes_resent),
    UROCE_COUNTER(req.naks_reordered),
    UROCE_COUNTER(req.caps_asked),
    UROCE_COUNTER(req.caps_selective),
    UROCE_COUNTER(cc.rtt_samples),
    UROCE_COUNTER(cc.delay_cuts),
    UROCE_COUNTER(cc.loss_cuts),
    UROCE_COUNTER(cc.timeouts),
    UROCE_COUNTER(cc.cnps),
    UROCE_COUNTER(cc.cnp_cuts),
    UROCE_GAUGE(cc_now.window),
    UROCE_GAUGE(cc_now.srtt_ns),
    UROCE_GAUGE(cc_now.min_rtt_ns),
    UROCE_GAUGE(cc_now.target_ns),
    UROCE_COUNTER(np.ce_marked),
    UROCE_COUNTER(np.cnps_sent),
    UROCE_COUNTER(resp.packets),
    UROCE_COUNTER(resp.duplicates),
    UROCE_COUNTER(resp.acks),
    UROCE_COUNTER(resp.seq_naks),
    UROCE_COUNTER(resp.seq_naks_repeated),
    UROCE_COUNTER(resp.rnr_naks),
    UROCE_COUNTER(resp.inv_req_naks),
    UROCE_COUNTER(resp.access_naks),
    UROCE_COUNTER(resp.op_naks),
    UROCE_COUNTER(resp.dropped),
    UROCE_COUNTER(resp.ooo_kept),
    UROCE_COUNTER(resp.ooo_replayed),
    UROCE_COUNTER(resp.caps_answered),
    UROCE_COUNTER(uc.packets),
    UROCE_COUNTER(uc.messages),
    UROCE_COUNTER(uc.dropped_messages),
    UROCE_COUNTER(uc.dropped_packets),
    UROCE_COUNTER(uc.no_recv),
    UROCE_COUNTER(ud.delivered),
    UROCE_COUNTER(ud.bad_qkey),
    UROCE_COUNTER(ud.no_recv),
    UROCE_COUNTER(ud.not_ud),
    UROCE_COUNTER(ud.too_long),
    UROCE_COUNTER(faults.in),
    UROCE_COUNTER(faults.out),
    UROCE_COUNTER(faults.dropped),
    UROCE_COUNTER(faults.duplicated),
    UROCE_COUNTER(faults.reordered),
    UROCE_COUNTER(faults.corrupted),
    UROCE_COUNTER(raw.sent),
    UROCE_COUNTER(raw.sent_bytes),
    UROCE_COUNTER(raw.send_waits),
    UROCE_COUNTER(raw.received),
    UROCE_COUNTER(raw.received_bytes),
    UROCE_COUNTER(raw.dropped),
};

#undef UROCE_COUNTER
#undef UROCE_GAUGE

// Every uint64_t after the magic is a counter, and each is named once.
static_assert(sizeof(kFields) / sizeof(kFields[0]) == sizeof(NetCounters) / 8 - 1,
              "a counter of NetCounters has no name in kFields");

}  // namespace

std::span<const CounterField> net_counter_fields() { return kFields; }

void add_counters(NetCounters* into, const NetCounters& from) {
  for (const CounterField& f : kFields) {
    if (f.gauge) continue;
    uint64_t a, b;
    memcpy(&a, reinterpret_cast<const char*>(into) + f.offset, 8);
    memcpy(&b, reinterpret_cast<const char*>(&from) + f.offset, 8);
    a += b;
    memcpy(reinterpret_cast<char*>(into) + f.offset, &a, 8);
  }
}

}  // namespace uroce::core
