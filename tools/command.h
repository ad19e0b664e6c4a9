// Running the command a tool wraps (uroce capture, uroce trace).
#pragma once

#include <string>
#include <vector>

namespace uroce::tools {

/// Runs argv with environment variable `name` set to `value`, and waits.
/// Ctrl-C reaches the command (same process group); this process stays to
/// gather what the command's processes left. Returns the command's exit
/// status (128 + signal if killed), 127 if it could not be run, or -1.
int run_with(const std::vector<std::string>& argv, const char* name, const std::string& value);

/// A fresh directory under $TMPDIR (or /tmp) named <prefix>XXXXXX, or "".
std::string make_temp_dir(const char* prefix);

}  // namespace uroce::tools
