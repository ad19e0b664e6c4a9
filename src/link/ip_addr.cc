#include "link/ip_addr.h"

#include <arpa/inet.h>

namespace uroce::link {

std::string to_string(const IpAddr& a) {
  char b[INET6_ADDRSTRLEN + 16];
  if (a.is_v4()) {
    const uint32_t v = a.ip4();
    inet_ntop(AF_INET, &v, b, sizeof(b));
  } else {
    inet_ntop(AF_INET6, a.b, b, sizeof(b));
  }
  std::string s = b;
  if (a.scope) s += "%" + std::to_string(a.scope);
  return s;
}

}  // namespace uroce::link
