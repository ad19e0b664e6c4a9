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
//   5: [ms]: time passes (requests waiting for a listener expire, messages
//      on the wire are sent again or given up)
//   6: a CM message from another host: [attribute] (modulo 9), then a MAD
//      made from the last one uroced sent (the comm IDs crossed, as an
//      answer has them; a REQ or SIDR REQ to port 7000 of 127.0.0.1), then
//      [n] (modulo 8) changes of [offset] [value] anywhere in it
//
// Oracles: the sanitizers, and state: once every connection is closed (and
// time has passed), uroced holds no id and no waiting request.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "contract/cm_protocol.h"
#include "daemon/cm_service.h"
#include "wire/cm_mad.h"

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
  daemon::CmService cm{daemon::CmService::Hooks{
      .want_write = [](int, bool) {},
      .send_mad =
          [this](const link::IpAddr&, const link::IpAddr&, std::span<const uint8_t> mad) {
            if (mad.size() == sizeof(last)) memcpy(last, mad.data(), sizeof(last));
            return true;
          },
      .node_guid = [](const link::IpAddr&) { return uint64_t(1); },
  }};
  int ours[kConns] = {-1, -1, -1, -1};    // uroced's end
  int theirs[kConns] = {-1, -1, -1, -1};  // the client's end
  uint64_t tokens[kConns] = {};           // what each open was answered with (an event connection's token)
  uint64_t now = 1'000'000'000;
  uint8_t last[wire::cm::kMadSize] = {};  // the MAD uroced sent last

  /// A MAD from another host, made from the last one sent.
  void from_wire(Input& in) {
    namespace wcm = wire::cm;
    static const uint16_t kAttrs[] = {0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18};
    uint8_t mad[wcm::kMadSize] = {};
    mad[0] = wcm::kBaseVersion;
    mad[1] = wcm::kClassCm;
    mad[2] = wcm::kCmClassVersion;
    mad[3] = wcm::kMethodSend;
    memcpy(mad + 8, last + 8, 8);  // the transaction
    const uint16_t attr = kAttrs[in.byte() % 9];
    mad[16] = uint8_t(attr >> 8);
    mad[17] = uint8_t(attr);
    uint8_t* body = mad + wcm::kMadHeaderSize;
    const uint8_t* sent = last + wcm::kMadHeaderSize;
    body[0] = 0x5e;  // our comm ID, then theirs
    body[1] = in.byte();
    memcpy(body + 4, sent, 4);
    if (attr == 0x10 || attr == 0x17) {
      // A request to port 7000 of 127.0.0.1 from 192.0.2.77 (its RDMA CM header).
      const bool sidr = attr == 0x17;
      const uint64_t sid = wcm::service_id(sidr ? uint16_t(cmproto::kPsUdp) : 0x0106, 7000);
      for (int i = 0; i < 8; ++i) body[8 + i] = uint8_t(sid >> (56 - 8 * i));
      wcm::CmaHeader h;
      h.port = 40000;
      const uint8_t src[4] = {192, 0, 2, 77}, dst[4] = {127, 0, 0, 1};
      memcpy(h.src + 12, src, 4);
      memcpy(h.dst + 12, dst, 4);
      wcm::encode(h,
                  std::span<uint8_t, wcm::CmaHeader::kSize>(body + (sidr ? 16 : 140), wcm::CmaHeader::kSize));
    }
    for (int n = in.byte() % 8; n > 0; --n) {
      const uint8_t off = in.byte();
      mad[off] = in.byte();
    }
    cm.on_mad(mad, link::IpAddr::v4(htonl(0xC000024D)), link::IpAddr::v4(htonl(0xC0000201)), now);
  }

  /// An event connection, or (how & 3 == 3) a call channel for another
  /// client's event connection (its token; a wrong one or another pid now
  /// and then: refused).
  void open(int c, uint8_t how) {
    if (ours[c] >= 0) return;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0) __builtin_trap();
    ours[c] = sv[0];
    theirs[c] = sv[1];
    Msg hello{};
    hello.op = uint32_t(cmproto::Op::kCmOpen);
    hello.arg = cmproto::kVersion;
    pid_t pid = 4242;
    if ((how & 3) == 3) {
      hello.event = cmproto::kCallChannel;
      hello.listen_handle = (how & 4) ? uint64_t(how) : tokens[(how >> 3) % kConns];
      if (how & 0x80) pid = 4243;
    }
    cm.adopt(ours[c], pid, hello);
    Msg ans{};
    tokens[c] = recv(theirs[c], &ans, sizeof(ans), MSG_DONTWAIT) == ssize_t(sizeof(ans)) ? ans.handle : 0;
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
    switch (action % 7) {
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
        h.open(c, in.byte());
        break;
      case 4:
        h.drain(c);
        break;
      case 5:
        h.now += uint64_t(in.byte()) * 1'000'000;
        h.cm.expire(h.now);
        break;
      case 6:
        h.from_wire(in);
        break;
    }
    h.drops();
  }
  for (int c = 0; c < kConns; ++c) h.close_conn(c);
  h.cm.expire(h.now + 10'000'000'000ull);  // requests from the wire wait for a listener a while
  if (h.cm.num_ids() != 0 || h.cm.waiting()) __builtin_trap();
  return 0;
}
