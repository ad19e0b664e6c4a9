// What uroced tells each client about one soft RoCE device (one per network
// interface). Plain data: it crosses the control socket as bytes.
#pragma once

#include <cstdint>
#include <cstdio>

namespace uroce::core {

constexpr uint32_t kMaxDevices = 16;
constexpr uint32_t kMaxGids = 16;

/// GID types as ibv_query_gid_type reports them (enum ibv_gid_type_sysfs).
enum class GidType : uint32_t { kIbRoceV1 = 0, kRoceV2 = 1 };

struct DeviceInfo {
  char name[64];  // "uroce_<ifname>"
  char ifname[16];
  uint32_t ifindex;
  uint32_t if_mtu;  // interface MTU in bytes
  uint8_t mac[6];
  uint8_t is_loopback;
  uint8_t pad;
  uint32_t num_gids;
  uint64_t node_guid;  // big-endian bytes as ibv_get_device_guid returns
  uint8_t gids[kMaxGids][16];
  uint32_t gid_types[kMaxGids];
};

/// IBV_MTU_* enum of the largest IB MTU that fits the interface MTU with
/// RoCE v2 headers (IPv4 20 + UDP 8 + BTH 12 + RETH 16 + ICRC 4), as rxe does.
inline uint32_t active_mtu_enum(uint32_t if_mtu) {
  uint32_t e = 5;
  while (e > 1 && (128u << e) + 60 > if_mtu) --e;
  return e;
}

/// ibv_device.dev_name of the device at `index` in uroced's list: the name of
/// the kernel's character device for it, /dev/infiniband/uverbs<N>, which
/// UCX checks before it uses a device (tools/devnodes.cc makes it).
inline void verbs_dev_name(uint32_t index, char* out, size_t n) { snprintf(out, n, "uverbs%u", index); }

}  // namespace uroce::core
