// uroce link, uroce stat, uroce res qp: what uroced serves and what its QPs
// counted (status.cc), read from uroced's report (contract/report.h).
#pragma once

#include <cstdint>
#include <string>

namespace uroce::tools {

struct StatOptions {
  bool json = false;
  std::string device;  // empty: every device
  uint32_t qpn = 0;    // non-zero: that QP's counters instead of the devices'
};

/// Each returns the exit status (0, or 1 with a message on stderr).
int link_show(bool json);
int stat_show(const StatOptions& o);
int res_qp_show(bool json);

}  // namespace uroce::tools
