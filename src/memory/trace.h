// UROCE_TRACE: a text timeline of what happens on each QP of a process —
// work requests posted, packets sent and received on the network link,
// completions, state changes — one line per event in a file of the
// process's own (`%p` in the name becomes the pid), for a developer
// following a hang or an error. `uroce trace -- COMMAND` sets it for every
// process of a command and merges their files per QP (tools/trace.cc).
// Off (the default) it costs one predictable branch per event.
#pragma once

#include <cstdint>

#include "contract/names.h"  // what trace lines print
#include "contract/types.h"

namespace uroce::wire {
struct Packet;
}

namespace uroce::core {

namespace trace_detail {
extern bool g_on;
}

/// Whether this process traces (UROCE_TRACE set when the library loaded).
inline bool tracing() { return __builtin_expect(trace_detail::g_on, false); }

/// One event of QP `qpn` ("post_send wr_id=7 RDMA_WRITE len=4096").
void trace(uint32_t qpn, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/// A packet the network link sent (`tx`) or received on QP `qpn`.
void trace_packet(uint32_t qpn, bool tx, const wire::Packet& p);

}  // namespace uroce::core
