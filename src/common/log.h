// Diagnostics. Level from env UROCE_LOG (error|warn|info|debug|trace or 0-4);
// default: errors only. Never used on the data path except under `if (unlikely)`.
#pragma once

#include <cstdarg>

namespace uroce {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3, kTrace = 4 };

/// Current threshold (read once from the environment).
LogLevel log_level();
/// printf-style logger writing "uroce[pid]: <msg>" to stderr.
void log_msg(LogLevel lvl, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace uroce

#define UROCE_LOG(lvl, ...)                                                            \
  do {                                                                                 \
    if (__builtin_expect(int(::uroce::LogLevel::lvl) <= int(::uroce::log_level()), 0)) \
      ::uroce::log_msg(::uroce::LogLevel::lvl, __VA_ARGS__);                           \
  } while (0)
#define UROCE_ERR(...) UROCE_LOG(kError, __VA_ARGS__)
#define UROCE_WARN(...) UROCE_LOG(kWarn, __VA_ARGS__)
#define UROCE_INFO(...) UROCE_LOG(kInfo, __VA_ARGS__)
#define UROCE_DBG(...) UROCE_LOG(kDebug, __VA_ARGS__)
