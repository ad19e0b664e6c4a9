// Fuzz target: uroced's request handling (daemon/requests.h) under a hostile
// client of its own user. The input is a series of records, each an action
// on one of four connections:
//   [op] [conn] [fd kind] then, by op % 4,
//     0: a request (sizeof(Request) bytes, its type taken modulo 14 so
//        that every type, and two unknown ones, come up often)
//     1: [len] and a message of len bytes (any size: truncated, oversized)
//     2: the connection closes
//     3: the connection (re)opens, trusted if the fd-kind byte is even
// with a descriptor of the kind the fd-kind byte names passed along (none, a
// good context segment, one without seals, too small, of the wrong magic,
// write-sealed; a pipe, /dev/null, UDP sockets). QP numbers are random, so a
// request may name "the last one allocated" (bit 0x80 of op).
//
// Oracles: the sanitizers (uroced maps what clients pass and stores into it
// when they go), and descriptors: after all connections close, the process
// holds exactly the descriptors it held before the input.
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "contract/control_protocol.h"
#include "contract/shm_layout.h"
#include "daemon/requests.h"

using namespace uroce;
using uroce::control::Request;

namespace {

int count_fds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

int segment_memfd(size_t size, bool seal_shrink, uint64_t magic, bool seal_write) {
  int fd = memfd_create("fuzz-seg", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0 || ftruncate(fd, off_t(size)) != 0) __builtin_trap();
  if (size >= sizeof(uint64_t)) (void)pwrite(fd, &magic, sizeof(magic), 0);
  int seals = (seal_shrink ? F_SEAL_SHRINK : 0) | (seal_write ? F_SEAL_WRITE : 0);
  if (seals) (void)fcntl(fd, F_ADD_SEALS, seals);
  return fd;
}

int udp_socket(bool connected) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s >= 0 && connected) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(9);  // discard: nothing is ever sent to it here
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    (void)connect(s, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  return s;
}

/// A descriptor of kind `k` for the request to pass (-1: none).
int make_fd(uint8_t k) {
  switch (k % 11) {
    case 1:
      return segment_memfd(1 << 20, true, core::kSegMagic, false);
    case 2:
      return segment_memfd(1 << 20, false, core::kSegMagic, false);
    case 3:
      return segment_memfd(16, true, core::kSegMagic, false);
    case 4:
      return segment_memfd(1 << 20, true, 0x4141414141414141ull, false);
    case 5:
      return segment_memfd(1 << 20, true, core::kSegMagic, true);
    case 6: {
      int p[2];
      if (pipe2(p, O_CLOEXEC) != 0) return -1;
      close(p[1]);
      return p[0];
    }
    case 7:
      return open("/dev/null", O_RDWR | O_CLOEXEC);
    case 8:
      return udp_socket(false);
    case 9:
      return udp_socket(true);
    case 10: {
      int sv[2];
      if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0) return -1;
      close(sv[1]);
      return sv[0];
    }
    default:
      return -1;
  }
}

constexpr int kConns = 4;
constexpr int kFakeFd0 = 100000;  // connection ids: never real descriptors here

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int id_watch = memfd_create("fuzz-idwatch", MFD_CLOEXEC);
  const int fds_before = count_fds();
  const int host = memfd_create("fuzz-host", MFD_CLOEXEC);
  {
    daemon::Requests::Hooks hooks;
    hooks.devices = [] { return std::vector<core::DeviceInfo>(2); };
    hooks.id_watch_fd = [] { return dup(id_watch); };
    daemon::ClientLimits limits;
    limits.connections_per_pid = 3;  // small, so the fuzzer reaches them
    limits.lingers = 4;
    daemon::Requests req(host, hooks, limits);
    bool open[kConns] = {};
    uint32_t last_qpn = 0;
    size_t i = 0;
    while (i + 3 <= size) {
      const uint8_t op = data[i], conn = data[i + 1] % kConns, kind = data[i + 2];
      i += 3;
      const int cfd = kFakeFd0 + conn;
      switch (op % 4) {
        case 0:
        case 1: {
          uint8_t msg[sizeof(Request) + 32] = {};
          size_t len;
          if (op % 4 == 0) {
            len = std::min(sizeof(Request), size - i);
            memcpy(msg, data + i, len);
            i += len;
            len = sizeof(Request);
            Request r;
            memcpy(&r, msg, sizeof(r));
            r.type %= 14;
            if (r.type == uint32_t(control::MsgType::kHello)) r.version = control::kProtoVersion;
            if (op & 0x80) r.qpn = last_qpn;
            // A linger's reply socket binds this port on loopback: keep it ephemeral.
            if (r.type == uint32_t(control::MsgType::kLinger)) r.arg[3] = 0;
            memcpy(msg, &r, sizeof(r));
          } else {
            if (i >= size) break;
            const size_t want = data[i++] % sizeof(msg);
            len = std::min<size_t>(want, size - i);
            memcpy(msg, data + i, len);
            i += len;
          }
          if (!open[conn]) break;
          auto a = req.handle(cfd, msg, len, make_fd(kind));
          if (a.reply && a.reply->qpn) last_qpn = a.reply->qpn;
          if (a.close_fd && a.fd >= 0) close(a.fd);
          if (a.drop) {
            req.close(cfd);
            open[conn] = false;
          }
          break;
        }
        case 2:
          if (open[conn]) req.close(cfd);
          open[conn] = false;
          break;
        case 3:
          if (open[conn]) req.close(cfd);
          open[conn] = req.open(cfd, 4242 + (kind & 1), (kind & 2) == 0);
          break;
      }
    }
    for (int c = 0; c < kConns; ++c)
      if (open[c]) req.close(kFakeFd0 + c);
    req.lingers().expire(~0ull, [](int) {});
    if (req.registry().num_ctxs() || req.registry().num_qpns() || req.registry().num_xrcds())
      __builtin_trap();
  }
  close(host);
  if (count_fds() != fds_before) __builtin_trap();  // a descriptor leaked
  return 0;
}
