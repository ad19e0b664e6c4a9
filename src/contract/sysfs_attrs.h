// What a uroce device shows under /sys/class/infiniband/<name>/, the
// attributes programs read there (ibv_devinfo's board_id, the GUIDs, ...):
// the library answers reads of them from memory (verbs/sysfs.cc), and
// `uroce sysfs -- COMMAND` writes them as files of a view of /sys/class
// that programs reading sysfs themselves see (tools/sysfs_view.cc).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "contract/device_info.h"

namespace uroce::core {

/// The attribute files of a device's directory.
std::span<const std::string_view> sysfs_attr_names();

/// The value of `attr` (one of sysfs_attr_names()) for `d`, without a
/// trailing newline; false if uroce provides no such attribute.
bool sysfs_attr(const DeviceInfo& d, std::string_view attr, std::string* value);

}  // namespace uroce::core
