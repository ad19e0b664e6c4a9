#include "contract/control_protocol.h"

#include <unistd.h>

#include <cstdlib>

namespace uroce::control {

std::string daemon_socket_name() {
  if (const char* s = getenv("UROCE_DAEMON_NAME"); s && *s) return std::string("uroce/") + s;
  return "uroce/uroced-uid" + std::to_string(getuid());
}

}  // namespace uroce::control
