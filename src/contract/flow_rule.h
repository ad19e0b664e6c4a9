// A flow steering rule (ibv_create_flow(3)) once its specs are checked and
// folded into one value and mask over wire::FlowKey (verbs/flow.cc): what
// the library's raw switch (net/raw_switch.h) matches frames against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "wire/flow_key.h"

namespace uroce::core {

/// ibv_flow_attr_type.
enum class FlowType : uint8_t { kNormal = 0, kAllDefault = 1, kMcDefault = 2, kSniffer = 3 };

struct FlowRule {
  wire::FlowKey val{};   // only masked bits set
  wire::FlowKey mask{};  // a set bit is matched
  FlowType type = FlowType::kNormal;
  bool dont_trap = false;  // IBV_FLOW_ATTR_FLAGS_DONT_TRAP: lower priorities (and the kernel) see it too
  uint16_t priority = 0;   // lower wins
};

/// Receive-side scaling (ibv_create_qp_ex with rx_hash_conf and an
/// indirection table, ibv_create_rwq_ind_table(3)): a frame a rule gives
/// the QP goes to the work queue its Toeplitz hash picks.
struct RssConfig {
  uint8_t key[64] = {};
  uint8_t key_len = 0;
  uint64_t fields = 0;            // RssField bits: what the hash reads
  std::vector<uint32_t> wq_qpns;  // the table's work queues (a power of two of them)
};

/// ibv_rx_hash_fields.
enum RssField : uint64_t {
  kRssSrcIpv4 = 1 << 0,
  kRssDstIpv4 = 1 << 1,
  kRssSrcIpv6 = 1 << 2,
  kRssDstIpv6 = 1 << 3,
  kRssSrcPortTcp = 1 << 4,
  kRssDstPortTcp = 1 << 5,
  kRssSrcPortUdp = 1 << 6,
  kRssDstPortUdp = 1 << 7,
};

/// The Toeplitz hash (Microsoft's RSS) of the fields of `k` that `fields`
/// names, in the order source address, destination address, source port,
/// destination port, under `key`.
uint32_t rss_hash(const wire::FlowKey& k, uint64_t fields, const uint8_t* key, size_t key_len);

}  // namespace uroce::core
