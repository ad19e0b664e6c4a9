// uroce sysfs -- COMMAND: runs COMMAND in a mount namespace of its own whose
// /sys/class holds an infiniband/ entry for each of uroce's devices
// (tools/sysfs_view.cc), for programs that read sysfs themselves instead of
// asking libibverbs (rdma-core's pyverbs tests find a device's interface in
// /sys/class/infiniband/<dev>/device/net/).
#pragma once

#include <string>
#include <vector>

namespace uroce::tools {

/// Sets the view up and execs `command` (does not return on success).
/// Returns the exit status for a failure: 1, or 127 if the command could
/// not be run.
int sysfs_view(const std::vector<std::string>& command);

}  // namespace uroce::tools
