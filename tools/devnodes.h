// uroce devnodes: the /dev/infiniband entries UCX looks for (devnodes.cc).
#pragma once

#include <string>
#include <vector>

namespace uroce::tools {

struct DevnodesOptions {
  bool remove = false;
  std::string dir = "/dev/infiniband";
  std::vector<std::string> devices;  // uroce device names; empty: the default choice
};

/// Makes (or removes) the entries; prints one line per device. Returns the
/// exit status: 0, or 1 if a chosen device is left without an entry UCX
/// accepts (or one could not be removed).
int devnodes(const DevnodesOptions& o);

}  // namespace uroce::tools
