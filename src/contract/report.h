// What uroced reports about the host's QPs and devices (control request
// kReport, for `uroce stat` and `uroce res qp`): a memfd holding a header,
// one record per QP of every process it serves, and one per device with the
// device's counters (its live QPs, and every QP it had that is gone).
#pragma once

#include <cstdint>
#include <type_traits>

#include "contract/counters.h"

namespace uroce::core {

struct ReportHeader {
  static constexpr uint64_t kMagic = 0x3154524f50455255ull;  // "UREPORT1"
  uint64_t magic;
  uint32_t num_qps;
  uint32_t num_devs;
  int32_t uroced_pid;
  uint32_t pad;
};

struct ReportQp {
  uint32_t qpn;
  uint32_t ctx_id;
  int32_t pid;     // the owner
  uint32_t type;   // QpType
  uint32_t state;  // QpState
  uint32_t dest_qpn;
  char dev[24];
  uint32_t has_counters;  // 1: on the network link, `counters` hold what it did
  uint32_t link;          // QpLink: how its messages travel
  NetCounters counters;
};

struct ReportDev {
  char dev[24];
  uint32_t qps;  // live QPs
  uint32_t pad;
  NetCounters counters;
};

static_assert(std::is_standard_layout_v<ReportHeader> && std::is_standard_layout_v<ReportQp> &&
              std::is_standard_layout_v<ReportDev>);

}  // namespace uroce::core
