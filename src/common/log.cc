#include "common/log.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace uroce {

static LogLevel parse_level() {
  const char* s = getenv("UROCE_LOG");
  if (!s || !*s) return LogLevel::kError;
  if (s[0] >= '0' && s[0] <= '4') return LogLevel(s[0] - '0');
  static const char* kNames[] = {"error", "warn", "info", "debug", "trace"};
  for (int i = 0; i < 5; ++i)
    if (strcasecmp(s, kNames[i]) == 0) return LogLevel(i);
  return LogLevel::kError;
}

LogLevel log_level() {
  static const LogLevel lvl = parse_level();
  return lvl;
}

void log_msg(LogLevel lvl, const char* fmt, ...) {
  char buf[1024];
  int n = snprintf(buf, sizeof(buf), "uroce[%d]: ", int(getpid()));
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof(buf) - size_t(n) - 1, fmt, ap);
  va_end(ap);
  if (m < 0) m = 0;
  size_t len = size_t(n) + std::min<size_t>(size_t(m), sizeof(buf) - size_t(n) - 2);
  buf[len++] = '\n';
  ssize_t w = write(2, buf, len);
  (void)w;
}

}  // namespace uroce
