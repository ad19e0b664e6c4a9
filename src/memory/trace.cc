#include "memory/trace.h"

#include <pthread.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>

#include "link/shm_link.h"  // self_pid
#include "wire/opcodes.h"
#include "wire/packet.h"

namespace uroce::core {

namespace trace_detail {
bool g_on = false;
}

namespace {

std::mutex g_mu;
FILE* g_file = nullptr;  // opened at the first event of this process
// Plain storage, set by the constructor below: a std::string here could be
// constructed after it ran (initialization order within a file is not that
// of the source for constructor functions) and lose the name.
char g_pattern[512];

void at_fork_child() {
  // The child writes a file of its own (its pid): it reopens at its first event.
  g_file = nullptr;  // the parent's FILE stays the parent's; no fclose of a shared buffer
}

__attribute__((constructor)) void trace_init() {
  const char* e = getenv("UROCE_TRACE");
  if (!e || !*e) return;
  snprintf(g_pattern, sizeof(g_pattern), "%s", e);
  trace_detail::g_on = true;
  pthread_atfork(nullptr, nullptr, at_fork_child);
}

FILE* file_locked() {
  if (g_file) return g_file;
  std::string name;
  for (size_t i = 0; g_pattern[i]; ++i) {
    if (g_pattern[i] == '%' && g_pattern[i + 1] == 'p') {
      name += std::to_string(getpid());
      ++i;
    } else {
      name += g_pattern[i];
    }
  }
  g_file = fopen(name.c_str(), "ae");
  if (!g_file) {
    trace_detail::g_on = false;  // nowhere to write: stop trying
    return nullptr;
  }
  setvbuf(g_file, nullptr, _IOLBF, 0);  // whole lines, as they happen: a hang leaves its last ones
  return g_file;
}

uint64_t wall_ns() {
  timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

}  // namespace

void trace(uint32_t qpn, const char* fmt, ...) {
  char text[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  const uint64_t now = wall_ns();
  std::lock_guard<std::mutex> g(g_mu);
  if (FILE* f = file_locked())
    fprintf(f, "%llu %d %u %s\n", (unsigned long long)now, int(link::self_pid()), qpn, text);
}

void trace_packet(uint32_t qpn, bool tx, const wire::Packet& p) {
  const wire::OpInfo* op = wire::op_info(p.bth.opcode);
  const char* dir = tx ? "tx" : "rx";
  const char* name = op ? op->name : p.bth.opcode == wire::kCnpOpcode ? "CNP" : "?";
  if (op && (op->flags & wire::kAckOp)) {
    const uint8_t s = p.syndrome;
    const char* kind = (s >> 5) == 0 ? "ACK" : (s >> 5) == 1 ? "RNR NAK" : (s >> 5) == 3 ? "NAK" : "?";
    trace(qpn, "%s %s psn=%u msn=%u %s(syndrome 0x%02x) to qp %u", dir, name, p.bth.psn, p.msn, kind, s,
          p.bth.dest_qp);
  } else {
    trace(qpn, "%s %s psn=%u len=%zu to qp %u%s", dir, name, p.bth.psn, p.payload.size(), p.bth.dest_qp,
          p.ce ? " (ECN CE)" : "");
  }
}

}  // namespace uroce::core
