#include "contract/sysfs_attrs.h"

#include <cstdio>

namespace uroce::core {

namespace {

constexpr std::string_view kNames[] = {"board_id", "node_guid", "sys_image_guid", "node_type",
                                       "fw_ver",   "hw_rev",    "hca_type"};

}  // namespace

std::span<const std::string_view> sysfs_attr_names() { return kNames; }

bool sysfs_attr(const DeviceInfo& d, std::string_view attr, std::string* value) {
  char v[128];
  const auto* g = reinterpret_cast<const uint8_t*>(&d.node_guid);
  if (attr == "board_id") {
    snprintf(v, sizeof(v), "uroce soft RoCE (%s)", d.ifname);
  } else if (attr == "node_guid" || attr == "sys_image_guid") {
    snprintf(v, sizeof(v), "%02x%02x:%02x%02x:%02x%02x:%02x%02x", g[0], g[1], g[2], g[3], g[4], g[5], g[6],
             g[7]);
  } else if (attr == "node_type") {
    snprintf(v, sizeof(v), "1: CA");
  } else if (attr == "fw_ver") {
    snprintf(v, sizeof(v), "0.1.0");
  } else if (attr == "hw_rev") {
    snprintf(v, sizeof(v), "0");
  } else if (attr == "hca_type") {
    snprintf(v, sizeof(v), "uroce");
  } else {
    return false;
  }
  *value = v;
  return true;
}

}  // namespace uroce::core
