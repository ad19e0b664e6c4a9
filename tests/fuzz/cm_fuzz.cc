// Fuzz target: uroced's connection manager (daemon/cm_service.h) under
// hostile clients of its own user. The input is a series of records, each an
// action on one of four connections, [action] [conn] and then, by action % 6:
//   0: a request: [op] [handle] [ps] [src] [dst] [arg] [private data length]
//      (op modulo 11: every request and an unknown one; handle modulo 16:
//      handles are numbered from 1, so most name an id that exists, of this
//      connection or another's; ps, src and dst pick from small tables of
//      port spaces and addresses, among them the loopback, wildcards, an
//      address of no interface and a family that is none)
//   1: [len] and a message of len bytes (any size)
//   2: the connection closes
//   3: the connection (re)opens
//   4: its socket is read empty (otherwise events pile up in it and in
//      uroced's queue for it)
//   5: [ms]: time passes (requests waiting for a listener expire)
//
// Oracles: the sanitizers, and state: once every connection is closed,
// uroced holds no id and no waiting request.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/cm_protocol.h"
#include "daemon/cm_service.h"

using namespace uroce;
using cmproto::Msg;

namespace {

constexpr int kConns = 4;

struct Input {
  const uint8_t* p;
  size_t n;
  uint8_t byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
};

void put_addr(uint8_t sel, uint8_t* out) {
  memset(out, 0, 28);
  auto v4 = [&](const char* ip, uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, ip, &a.sin_addr);
    memcpy(out, &a, sizeof(a));
  };
  auto v6 = [&](const char* ip, uint16_t port) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    inet_pton(AF_INET6, ip, &a.sin6_addr);
    memcpy(out, &a, sizeof(a));
  };
  switch (sel % 8) {
    case 0:
      v4("127.0.0.1", 7000);
      break;
    case 1:
      v4("127.0.0.1", 0);
      break;
    case 2:
      v4("0.0.0.0", 7000);
      break;
    case 3:
      v6("::1", 7000);
      break;
    case 4:
      v6("::", 7000);
      break;
    case 5:
      v4("192.0.2.77", 7000);
      break;  // no interface has it
    case 6:
      v4("127.0.0.1", 7001);
      break;
    default:
      memset(out, 0xA5, 28);
      break;  // no family at all
  }
}

struct Harness {
  daemon::CmService cm{[](int, bool) {}};
  int ours[kConns] = {-1, -1, -1, -1};    // uroced's end
  int theirs[kConns] = {-1, -1, -1, -1};  // the client's end
  uint64_t now = 1'000'000'000;

  void open(int c) {
    if (ours[c] >= 0) return;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0) __builtin_trap();
    ours[c] = sv[0];
    theirs[c] = sv[1];
    Msg hello{};
    hello.op = uint32_t(cmproto::Op::kCmOpen);
    hello.arg = cmproto::kVersion;
    cm.adopt(ours[c], 4242, hello);
  }
  void close_conn(int c) {
    if (ours[c] < 0) return;
    cm.close(ours[c]);
    ::close(ours[c]);
    ::close(theirs[c]);
    ours[c] = theirs[c] = -1;
  }
  void drain(int c) {
    if (theirs[c] < 0) return;
    uint8_t buf[sizeof(Msg) + 16];
    while (recv(theirs[c], buf, sizeof(buf), MSG_DONTWAIT) > 0) {
    }
    cm.on_writable(ours[c]);
  }
  void drops() {
    for (int fd : cm.take_drops())
      for (int c = 0; c < kConns; ++c)
        if (ours[c] == fd) close_conn(c);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Harness h;
  Input in{data, size};
  while (in.n > 0) {
    const uint8_t action = in.byte();
    const int c = in.byte() % kConns;
    switch (action % 6) {
      case 0: {
        if (h.ours[c] < 0) break;
        Msg m{};
        m.op = uint32_t(cmproto::Op::kCreateId) + in.byte() % 11;
        m.handle = in.byte() % 16;
        static const uint32_t kPs[] = {0x0106, cmproto::kPsUdp, 0x013F, cmproto::kPsIpoib, 0x55};
        m.ps = kPs[in.byte() % 5];
        put_addr(in.byte(), m.src);
        put_addr(in.byte(), m.dst);
        m.arg = in.byte();
        m.conn.private_data_len = in.byte();
        m.conn.qpn = 0x123456;
        h.cm.on_message(h.ours[c], &m, sizeof(m), h.now);
        break;
      }
      case 1: {
        if (h.ours[c] < 0) break;
        size_t len = in.byte() | size_t(in.byte() & 1) << 8;
        len = len < in.n ? len : in.n;
        uint8_t buf[512] = {};
        memcpy(buf, in.p, len);
        in.p += len;
        in.n -= len;
        h.cm.on_message(h.ours[c], buf, len, h.now);
        break;
      }
      case 2:
        h.close_conn(c);
        break;
      case 3:
        h.open(c);
        break;
      case 4:
        h.drain(c);
        break;
      case 5:
        h.now += uint64_t(in.byte()) * 1'000'000;
        h.cm.expire(h.now);
        break;
    }
    h.drops();
  }
  for (int c = 0; c < kConns; ++c) h.close_conn(c);
  if (h.cm.num_ids() != 0 || h.cm.waiting()) __builtin_trap();
  return 0;
}
