// Device limits: one table read by ibv_query_device(_ex) and by every
// validation in create/modify/post paths.
#pragma once

#include <cstdint>

#include "contract/types.h"

namespace uroce::core {

struct DeviceLimits {
  uint64_t max_mr_size;
  uint32_t max_qp;
  uint32_t max_qp_wr;
  uint32_t max_sge;
  uint32_t max_sge_rd;
  uint32_t max_cq;
  uint32_t max_cqe;
  uint32_t max_mr;
  uint32_t max_pd;
  uint32_t max_qp_rd_atom;
  uint32_t max_qp_init_rd_atom;
  uint32_t max_res_rd_atom;
  uint32_t max_srq;
  uint32_t max_srq_wr;
  uint32_t max_srq_sge;
  uint32_t max_ah;
  uint32_t max_inline_data;
  uint32_t max_mcast_grp;
  uint32_t max_mcast_qp_attach;
  uint32_t max_total_mcast_qp_attach;
  uint32_t max_pkeys;
  uint32_t gid_tbl_len;
  uint32_t max_msg_sz;
  uint32_t num_comp_vectors;
  uint64_t page_size_cap;
  uint64_t max_dm_size;         // device memory (core/device_memory.h), per context
  uint32_t hca_core_clock_khz;  // completion timestamps are in ns
  /// Packet pacing of RAW_PACKET QPs (IBV_QP_RATE_LIMIT, kbit/s; 0 =
  /// unpaced): net/raw_engine.h. Up to the port's 4X EDR rate.
  uint32_t qp_rate_limit_min_kbps, qp_rate_limit_max_kbps;
  /// 0xFFFFFF, as Soft-RoCE (rxe) reports: no IEEE OUI, so perftest, UCX and
  /// pyverbs take their generic paths; 0 is refused by rdma-core's test suite.
  uint32_t vendor_id;
  uint32_t vendor_part_id;
  uint32_t hw_ver;
};

inline constexpr DeviceLimits kLimits = {
    .max_mr_size = 1ull << 40,
    .max_qp = 1u << 16,
    .max_qp_wr = 1u << 14,
    .max_sge = 32,
    .max_sge_rd = 32,
    .max_cq = 1u << 14,
    .max_cqe = (1u << 22) - 1,
    .max_mr = kMaxMrPerContext - 1,  // slot 0 is never used
    .max_pd = 1u << 16,
    .max_qp_rd_atom = 128,
    .max_qp_init_rd_atom = 128,
    .max_res_rd_atom = 128u << 16,
    .max_srq = 1u << 12,
    .max_srq_wr = 1u << 14,
    .max_srq_sge = 32,
    .max_ah = 1u << 16,
    .max_inline_data = 512,
    .max_mcast_grp = 8192,
    .max_mcast_qp_attach = 56,
    .max_total_mcast_qp_attach = 8192 * 56,
    .max_pkeys = 1,
    .gid_tbl_len = 16,
    .max_msg_sz = 1u << 31,
    .num_comp_vectors = 1,
    .page_size_cap = 0xfffff000,
    .max_dm_size = 128u << 10,  // what mlx5 ConnectX-5 reports
    .hca_core_clock_khz = 1000000,
    .qp_rate_limit_min_kbps = 1,
    .qp_rate_limit_max_kbps = 100'000'000,
    .vendor_id = 0xffffff,
    .vendor_part_id = 0,
    .hw_ver = 0,
};

/// IB path MTU enum (IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5) to bytes.
inline constexpr uint32_t mtu_enum_to_bytes(uint32_t m) { return m >= 1 && m <= 5 ? 128u << m : 0; }

}  // namespace uroce::core
