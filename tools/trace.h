// uroce trace -- COMMAND: the command's processes write UROCE_TRACE files
// (memory/trace.h); this merges them into one timeline per QP.
#pragma once

#include <string>
#include <vector>

namespace uroce::tools {

/// Runs `command` traced and writes the timelines to `out` (empty: stderr).
/// Returns the command's exit status (1 if nothing could be traced).
int trace(const std::string& out, const std::vector<std::string>& command);

}  // namespace uroce::tools
