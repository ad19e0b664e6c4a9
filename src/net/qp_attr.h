// A QP's attributes (ibv_qp_attr, reduced), as ibv_modify_qp sets them
// and the link engines read them (core/qp_state.h has the state machine's
// rules for them).
#pragma once

#include <cstdint>

#include "contract/types.h"
#include "net/wr.h"

namespace uroce::core {

struct QpCaps {
  uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data;
};

/// Attributes a modify may carry (ibv_qp_attr, reduced).
struct QpModifyArgs {
  QpState state, cur_state;
  uint32_t access_flags, pkey_index, qkey, path_mtu, dest_qpn, rq_psn, sq_psn;
  uint8_t port_num, timeout, retry_cnt, rnr_retry, min_rnr_timer, max_rd_atomic, max_dest_rd_atomic,
      sq_draining, en_sqd_async_notify;
  uint32_t rate_limit;  // kbit/s (IBV_QP_RATE_LIMIT; RAW_PACKET QPs pace by it)
  AddressVector av;
  QpCaps cap;
};

}  // namespace uroce::core
