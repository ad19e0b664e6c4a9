// The names people read for the device model's enums: in trace lines,
// `uroce res qp`, and (for completion status) ibv_wc_status_str, whose
// text is rdma-core's, because programs print it and scripts compare it.
#pragma once

#include <cstdint>

#include "contract/shm_layout.h"
#include "contract/types.h"

namespace uroce::core {

/// "RDMA_WRITE", "SEND_WITH_IMM" (the IBV_WR_ name without its prefix); "?" if none.
const char* wr_opcode_name(WrOpcode op);
/// "RECV", "RDMA_READ" (the IBV_WC_ name without its prefix); "?" if none.
const char* wc_opcode_name(WcOpcode op);
/// rdma-core's text for an ibv_wc_status ("transport retry counter
/// exceeded"); "unknown" for a value it does not name.
const char* wc_status_str(uint32_t status);
/// "RC", "XRC_RECV" (the IBV_QPT_ name without its prefix); "?" if none.
const char* qp_type_name(QpType t);
/// "RESET", "RTS" (the IBV_QPS_ name without its prefix); "?" if none.
const char* qp_state_name(QpState s);
/// "shm", "udp", "xdp" (QpShm::link); "?" if none.
const char* qp_link_name(uint32_t link);

}  // namespace uroce::core
