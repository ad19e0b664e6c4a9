// Discovers the soft RoCE devices: one per UP interface with an IPv4 address
// or an IPv6 one beyond the link-local (loopback included), or the
// interfaces named in UROCE_NETDEVS="lo,eth0".
#pragma once

#include <vector>

#include "contract/device_info.h"

namespace uroce::daemon {

/// Builds the device table from the interfaces of this network namespace.
std::vector<core::DeviceInfo> discover_devices();

}  // namespace uroce::daemon
