// Enum-to-text and rate conversions of the verbs API, and the kernel-ABI
// struct copies (ibv_copy_*_kern) that rdma-core exports from IBVERBS_1.0/1.1.
//
// The strings are the exact text rdma-core v44 returns, because programs
// print them and users (and scripts) compare them: ibv_rc_pingpong prints
// "Failed status transport retry counter exceeded (12) for wr_id ...".
// Note that ibv_devinfo's "PORT_ACTIVE" comes from its own table, not from
// ibv_port_state_str, which returns "active".

#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/export.h"
#include "contract/names.h"

namespace {

constexpr std::array<const char*, IBV_EVENT_WQ_FATAL + 1> kEventTypeNames = {
    "CQ error",                                 // IBV_EVENT_CQ_ERR
    "local work queue catastrophic error",      // IBV_EVENT_QP_FATAL
    "invalid request local work queue error",   // IBV_EVENT_QP_REQ_ERR
    "local access violation work queue error",  // IBV_EVENT_QP_ACCESS_ERR
    "communication established",                // IBV_EVENT_COMM_EST
    "send queue drained",                       // IBV_EVENT_SQ_DRAINED
    "path migrated",                            // IBV_EVENT_PATH_MIG
    "path migration request error",             // IBV_EVENT_PATH_MIG_ERR
    "local catastrophic error",                 // IBV_EVENT_DEVICE_FATAL
    "port active",                              // IBV_EVENT_PORT_ACTIVE
    "port error",                               // IBV_EVENT_PORT_ERR
    "LID change",                               // IBV_EVENT_LID_CHANGE
    "P_Key change",                             // IBV_EVENT_PKEY_CHANGE
    "SM change",                                // IBV_EVENT_SM_CHANGE
    "SRQ catastrophic error",                   // IBV_EVENT_SRQ_ERR
    "SRQ limit reached",                        // IBV_EVENT_SRQ_LIMIT_REACHED
    "last WQE reached",                         // IBV_EVENT_QP_LAST_WQE_REACHED
    "client reregistration",                    // IBV_EVENT_CLIENT_REREGISTER
    "GID table change",                         // IBV_EVENT_GID_CHANGE
    "WQ fatal",                                 // IBV_EVENT_WQ_FATAL
};

// Indexed from IBV_NODE_CA (1); IBV_NODE_UNKNOWN (-1) and 0 are "unknown".
constexpr std::array<const char*, IBV_NODE_UNSPECIFIED - IBV_NODE_CA + 1> kNodeTypeNames = {
    "InfiniBand channel adapter",  // IBV_NODE_CA
    "InfiniBand switch",           // IBV_NODE_SWITCH
    "InfiniBand router",           // IBV_NODE_ROUTER
    "iWARP NIC",                   // IBV_NODE_RNIC
    "usNIC",                       // IBV_NODE_USNIC
    "usNIC UDP",                   // IBV_NODE_USNIC_UDP
    "unspecified",                 // IBV_NODE_UNSPECIFIED
};

constexpr std::array<const char*, IBV_PORT_ACTIVE_DEFER + 1> kPortStateNames = {
    "no state change (NOP)",  // IBV_PORT_NOP
    "down",                   // IBV_PORT_DOWN
    "init",                   // IBV_PORT_INIT
    "armed",                  // IBV_PORT_ARMED
    "active",                 // IBV_PORT_ACTIVE
    "active defer",           // IBV_PORT_ACTIVE_DEFER
};

constexpr const char* kUnknown = "unknown";

// std::array zero-fills missing initializers; make a short list an error.
template <std::size_t N>
constexpr bool all_named(const std::array<const char*, N>& table) {
  for (const char* name : table)
    if (name == nullptr) return false;
  return true;
}
static_assert(all_named(kEventTypeNames));
static_assert(all_named(kNodeTypeNames));
static_assert(all_named(kPortStateNames));

/// Bounds-checked lookup; `first` is the enum value stored at index 0.
template <std::size_t N>
constexpr const char* lookup(const std::array<const char*, N>& table, long value, long first = 0) {
  if (value < first || value - first >= static_cast<long>(N)) return kUnknown;
  return table[static_cast<std::size_t>(value - first)];
}

// One row per enum ibv_rate value. mult is the multiple of 2.5 Gb/s, or -1
// for the rates whose signalling is not a multiple of it (FDR and EDR codings:
// 14, 56, 112, 168, 25, 100, 200, 300 Gb/s), exactly as rdma-core v44 answers.
// mbps is the data rate in Mb/s, with the 64b/66b-coded rates at their real
// value (e.g. FDR 14 Gb/s = 14062 Mb/s).
struct RateRow {
  ibv_rate rate;
  int mult;
  int mbps;
};

constexpr std::array<RateRow, 23> kRates = {{
    {IBV_RATE_2_5_GBPS, 1, 2500},     {IBV_RATE_5_GBPS, 2, 5000},         {IBV_RATE_10_GBPS, 4, 10000},
    {IBV_RATE_20_GBPS, 8, 20000},     {IBV_RATE_30_GBPS, 12, 30000},      {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},    {IBV_RATE_80_GBPS, 32, 80000},      {IBV_RATE_120_GBPS, 48, 120000},
    {IBV_RATE_14_GBPS, -1, 14062},    {IBV_RATE_56_GBPS, -1, 56250},      {IBV_RATE_112_GBPS, -1, 112500},
    {IBV_RATE_168_GBPS, -1, 168750},  {IBV_RATE_25_GBPS, -1, 25781},      {IBV_RATE_100_GBPS, -1, 103125},
    {IBV_RATE_200_GBPS, -1, 206250},  {IBV_RATE_300_GBPS, -1, 309375},    {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},    {IBV_RATE_400_GBPS, 160, 425000},   {IBV_RATE_600_GBPS, 240, 637500},
    {IBV_RATE_800_GBPS, 320, 850000}, {IBV_RATE_1200_GBPS, 480, 1275000},
}};

// Every enum ibv_rate value except IBV_RATE_MAX (0) has exactly one row.
constexpr bool rates_cover_enum() {
  for (int r = IBV_RATE_2_5_GBPS; r <= IBV_RATE_1200_GBPS; ++r) {
    int n = 0;
    for (const RateRow& row : kRates) n += (row.rate == r);
    if (r != IBV_RATE_MAX && n != 1) return false;
  }
  return kRates.size() == IBV_RATE_1200_GBPS - 1;  // values 2..24
}
static_assert(rates_cover_enum(), "kRates must list every ibv_rate once");

constexpr const RateRow* find_rate(ibv_rate rate) {
  for (const RateRow& row : kRates)
    if (row.rate == rate) return &row;
  return nullptr;
}

}  // namespace

// The text lives with the device model (contract/names.h): trace lines print it too.
static_assert(IBV_WC_TM_RNDV_INCOMPLETE == 23, "core::wc_status_str names 0..23");
UROCE_EXPORT const char* ibv_wc_status_str(ibv_wc_status status) {
  return uroce::core::wc_status_str(uint32_t(status));
}

UROCE_EXPORT const char* ibv_event_type_str(ibv_event_type event) { return lookup(kEventTypeNames, event); }

UROCE_EXPORT const char* ibv_node_type_str(ibv_node_type node_type) {
  return lookup(kNodeTypeNames, node_type, IBV_NODE_CA);
}

UROCE_EXPORT const char* ibv_port_state_str(ibv_port_state port_state) {
  return lookup(kPortStateNames, port_state);
}

UROCE_EXPORT int ibv_rate_to_mult(ibv_rate rate) {
  const RateRow* row = find_rate(rate);
  return row != nullptr ? row->mult : -1;
}

UROCE_EXPORT ibv_rate mult_to_ibv_rate(int mult) {
  for (const RateRow& row : kRates)
    if (row.mult > 0 && row.mult == mult) return row.rate;
  return IBV_RATE_MAX;
}

UROCE_EXPORT int ibv_rate_to_mbps(ibv_rate rate) {
  const RateRow* row = find_rate(rate);
  return row != nullptr ? row->mbps : -1;
}

UROCE_EXPORT ibv_rate mbps_to_ibv_rate(int mbps) {
  for (const RateRow& row : kRates)
    if (row.mbps == mbps) return row.rate;
  return IBV_RATE_MAX;
}

// ---- Copies between kernel-ABI structs and user structs ---------------------
// The kernel structs come from <rdma/ib_user_verbs.h> and <rdma/ib_user_sa.h>
// (rdma-core's <infiniband/kern-abi.h> and marshall.h are not installed; these
// are the types they alias). Field by field: the layouts differ.

UROCE_EXPORT void ibv_copy_ah_attr_from_kern(ibv_ah_attr* dst, ib_uverbs_ah_attr* src) {
  static_assert(sizeof(dst->grh.dgid.raw) == sizeof(src->grh.dgid));
  memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid.raw));
  dst->grh.flow_label = src->grh.flow_label;
  dst->grh.sgid_index = src->grh.sgid_index;
  dst->grh.hop_limit = src->grh.hop_limit;
  dst->grh.traffic_class = src->grh.traffic_class;
  dst->dlid = src->dlid;
  dst->sl = src->sl;
  dst->src_path_bits = src->src_path_bits;
  dst->static_rate = src->static_rate;
  dst->is_global = src->is_global;
  dst->port_num = src->port_num;
}

UROCE_EXPORT void ibv_copy_qp_attr_from_kern(ibv_qp_attr* dst, ib_uverbs_qp_attr* src) {
  // qp_state is left to the caller, as rdma-core does.
  dst->cur_qp_state = static_cast<ibv_qp_state>(src->cur_qp_state);
  dst->path_mtu = static_cast<ibv_mtu>(src->path_mtu);
  dst->path_mig_state = static_cast<ibv_mig_state>(src->path_mig_state);
  dst->qkey = src->qkey;
  dst->rq_psn = src->rq_psn;
  dst->sq_psn = src->sq_psn;
  dst->dest_qp_num = src->dest_qp_num;
  dst->qp_access_flags = static_cast<unsigned int>(src->qp_access_flags);

  dst->cap.max_send_wr = src->max_send_wr;
  dst->cap.max_recv_wr = src->max_recv_wr;
  dst->cap.max_send_sge = src->max_send_sge;
  dst->cap.max_recv_sge = src->max_recv_sge;
  dst->cap.max_inline_data = src->max_inline_data;

  ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
  ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);

  dst->pkey_index = src->pkey_index;
  dst->alt_pkey_index = src->alt_pkey_index;
  dst->en_sqd_async_notify = src->en_sqd_async_notify;
  dst->sq_draining = src->sq_draining;
  dst->max_rd_atomic = src->max_rd_atomic;
  dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
  dst->min_rnr_timer = src->min_rnr_timer;
  dst->port_num = src->port_num;
  dst->timeout = src->timeout;
  dst->retry_cnt = src->retry_cnt;
  dst->rnr_retry = src->rnr_retry;
  dst->alt_port_num = src->alt_port_num;
  dst->alt_timeout = src->alt_timeout;
}

UROCE_EXPORT void ibv_copy_path_rec_from_kern(ibv_sa_path_rec* dst, ib_user_path_rec* src) {
  static_assert(sizeof(dst->dgid.raw) == sizeof(src->dgid));
  static_assert(sizeof(dst->sgid.raw) == sizeof(src->sgid));
  memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid.raw));
  memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid.raw));
  dst->dlid = src->dlid;
  dst->slid = src->slid;
  dst->raw_traffic = static_cast<int>(src->raw_traffic);
  dst->flow_label = src->flow_label;
  dst->hop_limit = src->hop_limit;
  dst->traffic_class = src->traffic_class;
  dst->reversible = static_cast<int>(src->reversible);
  dst->numb_path = src->numb_path;
  dst->pkey = src->pkey;
  dst->sl = src->sl;
  dst->mtu_selector = src->mtu_selector;
  dst->mtu = static_cast<uint8_t>(src->mtu);
  dst->rate_selector = src->rate_selector;
  dst->rate = src->rate;
  dst->packet_life_time_selector = src->packet_life_time_selector;
  dst->packet_life_time = src->packet_life_time;
  dst->preference = src->preference;
}

UROCE_EXPORT void ibv_copy_path_rec_to_kern(ib_user_path_rec* dst, ibv_sa_path_rec* src) {
  memcpy(dst->dgid, src->dgid.raw, sizeof(dst->dgid));
  memcpy(dst->sgid, src->sgid.raw, sizeof(dst->sgid));
  dst->dlid = src->dlid;
  dst->slid = src->slid;
  dst->raw_traffic = static_cast<__u32>(src->raw_traffic);
  dst->flow_label = src->flow_label;
  dst->hop_limit = src->hop_limit;
  dst->traffic_class = src->traffic_class;
  dst->reversible = static_cast<__u32>(src->reversible);
  dst->numb_path = src->numb_path;
  dst->pkey = src->pkey;
  dst->sl = src->sl;
  dst->mtu_selector = src->mtu_selector;
  dst->mtu = src->mtu;
  dst->rate_selector = src->rate_selector;
  dst->rate = src->rate;
  dst->packet_life_time_selector = src->packet_life_time_selector;
  dst->packet_life_time = src->packet_life_time;
  dst->preference = src->preference;
}
