// The seam between the exported sysfs readers (sysfs.cc) and uroce's devices.
//
// uroce devices have an ibdev_path such as /sys/class/infiniband/uroce_lo that
// does not exist on disk; programs still read attributes under it through our
// ibv_read_sysfs_file (ibv_devinfo reads "<ibdev_path>/board_id"). The hook
// answers those reads from memory before anything touches the filesystem.
#pragma once

#include <cstddef>

namespace uroce::verbs {

/// Answers a sysfs read for a path that belongs to a uroce device.
///
/// full_path is exactly "<dir>/<file>" as composed by the caller (no
/// normalisation: a dir ending in '/' yields "//"). Returns false if the path
/// is not ours; the caller then reads the real file. Returns true if it is
/// ours, with *out_len set the way ibv_read_sysfs_file reports it:
///  - the value's length, with buf holding the value NUL-terminated and
///    without a trailing newline (it must fit in size bytes, NUL included);
///  - or -1 with errno set (ENOENT for an attribute uroce does not provide,
///    EOVERFLOW if the value does not fit).
/// Called from any thread, possibly before main; must not throw.
bool sysfs_virtual_read(const char* full_path, char* buf, size_t size, int* out_len);

}  // namespace uroce::verbs
