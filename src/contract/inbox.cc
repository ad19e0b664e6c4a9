#include "contract/inbox.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <type_traits>

#include "common/unix_socket.h"
#include "contract/control_protocol.h"

namespace uroce::core {

namespace {

constexpr uint32_t kFwdMagic = 0x75724657;  // "urFW"
// A packet is at most one path MTU (4096) of payload plus its headers.
constexpr size_t kMaxPacketBytes = 8192;
constexpr size_t kMaxBatchBytes = NetForwarder::kMaxBatchBytes;
constexpr int kSocketBufBytes = 4 << 20;  // room for a window of batches

/// What precedes each packet (BTH .. ICRC) in a datagram to an inbox.
struct FwdHeader {
  uint32_t magic;
  uint32_t len;
  link::IpAddr from_ip, to_ip;
  uint16_t from_port, to_port;
};
static_assert(std::is_trivially_copyable_v<FwdHeader>);

std::string inbox_name(int32_t pid) { return control::daemon_socket_name() + "/net/" + std::to_string(pid); }

bool send_all(int fd, const std::vector<uint8_t>& bytes) {
  return send(fd, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL) == ssize_t(bytes.size());
}

}  // namespace

NetForwarder::NetForwarder() = default;

NetForwarder::~NetForwarder() {
  for (Batch& b : batches_)
    if (b.fd >= 0) close(b.fd);
}

void NetForwarder::reset() {
  for (Batch& b : batches_)
    if (b.fd >= 0) close(b.fd);  // this process's copy
  batches_.clear();
}

NetForward NetForwarder::add_for(int32_t pid, const wire::Packet& p, const link::UdpAddr& from,
                                 const link::UdpAddr& to) {
  Batch* b = nullptr;
  for (Batch& x : batches_)
    if (x.pid == pid) b = &x;
  if (!b) {
    batches_.emplace_back();
    b = &batches_.back();
    b->pid = pid;
    b->bytes.reserve(kMaxBatchBytes);
  }
  // A full batch goes now (what it loses, flush() reports).
  if (b->bytes.size() + sizeof(FwdHeader) + kMaxPacketBytes > kMaxBatchBytes) lost_ += send(*b);
  const size_t at = b->bytes.size();
  b->bytes.resize(at + sizeof(FwdHeader) + kMaxPacketBytes);
  uint8_t* out = b->bytes.data() + at;
  wire::Packet q = p;  // encode() sets the pad
  const size_t n = wire::encode(q, out + sizeof(FwdHeader), kMaxPacketBytes - wire::kIcrcBytes);
  if (n == 0) {
    b->bytes.resize(at);
    return NetForward::kNoSuchQp;
  }
  memset(out + sizeof(FwdHeader) + n, 0, wire::kIcrcBytes);  // the receiving process checked it
  const FwdHeader h{kFwdMagic, uint32_t(n + wire::kIcrcBytes), from.ip, to.ip, from.port, to.port};
  memcpy(out, &h, sizeof(h));
  b->bytes.resize(at + sizeof(FwdHeader) + h.len);
  ++b->packets;
  return NetForward::kPassed;
}

uint64_t NetForwarder::send(Batch& b) {
  if (b.bytes.empty()) return 0;
  if (b.fd < 0) {
    // Connected, so that a full inbox can be waited for (POLLOUT).
    b.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr;
    const socklen_t alen = make_abstract_addr(inbox_name(b.pid), &addr);
    if (b.fd >= 0) {
      (void)setsockopt(b.fd, SOL_SOCKET, SO_SNDBUF, &kSocketBufBytes, sizeof(kSocketBufBytes));
      if (connect(b.fd, reinterpret_cast<sockaddr*>(&addr), alen) != 0) {
        close(b.fd);
        b.fd = -1;
      }
    }
  }
  bool sent = false;
  if (b.fd >= 0) {
    for (int tries = 0; tries < 2 && !sent; ++tries) {
      if (send_all(b.fd, b.bytes)) {
        sent = true;
      } else if (errno == EAGAIN && tries == 0) {
        pollfd pf{b.fd, POLLOUT, 0};
        (void)::poll(&pf, 1, kFullWaitMs);
      } else if (errno != EAGAIN) {
        close(b.fd);  // the owner is gone (or its inbox): connect again next time
        b.fd = -1;
        break;
      }
    }
  }
  const uint64_t lost = sent ? 0 : b.packets;
  b.bytes.clear();
  b.packets = 0;
  return lost;
}

uint64_t NetForwarder::flush() {
  uint64_t lost = lost_;
  lost_ = 0;
  for (Batch& b : batches_) lost += send(b);
  return lost;
}

Result<std::unique_ptr<NetInbox>> NetInbox::open(int32_t owner) {
  std::unique_ptr<NetInbox> in(new NetInbox());
  in->fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (in->fd_ < 0) return Status(errno);
  const int one = 1;
  if (setsockopt(in->fd_, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0) return Status(errno);
  (void)setsockopt(in->fd_, SOL_SOCKET, SO_RCVBUF, &kSocketBufBytes, sizeof(kSocketBufBytes));
  sockaddr_un addr;
  const socklen_t alen = make_abstract_addr(inbox_name(owner), &addr);
  if (bind(in->fd_, reinterpret_cast<sockaddr*>(&addr), alen) != 0) return Status(errno);
  in->buf_.resize(kMaxBatchBytes);
  return in;
}

NetInbox::~NetInbox() {
  if (fd_ >= 0) close(fd_);
}

int NetInbox::poll(link::UdpEndpoint::OnPacket on_packet, int max, bool* more) {
  int got = 0;
  if (more) *more = false;
  while (got < max) {
    iovec iov{buf_.data(), buf_.size()};
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(ucred))];
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof(ctl);
    const ssize_t n = recvmsg(fd_, &m, MSG_DONTWAIT);
    if (n < 0) return got;  // EAGAIN: empty
    ++got;
    // Only this user's processes may hand packets in (docs/DESIGN: "Trust").
    const cmsghdr* c = CMSG_FIRSTHDR(&m);
    ucred cred{};
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS)
      memcpy(&cred, CMSG_DATA(c), sizeof(cred));
    FwdHeader h;
    if (!c || cred.uid != getuid() || (m.msg_flags & MSG_TRUNC)) {
      ++refused_;
      continue;
    }
    // Records: a header, then the packet it describes.
    for (size_t at = 0; at + sizeof(h) <= size_t(n);) {
      memcpy(&h, buf_.data() + at, sizeof(h));
      wire::Packet p;
      if (h.magic != kFwdMagic || h.len > size_t(n) - at - sizeof(h) ||
          wire::decode({buf_.data() + at + sizeof(h), h.len}, &p) != wire::DecodeError::kNone) {
        ++refused_;
        break;
      }
      const link::UdpAddr from{h.from_ip, h.from_port}, to{h.to_ip, h.to_port};
      on_packet(p, from, to);
      at += sizeof(h) + h.len;
    }
  }
  if (more) *more = true;
  return got;
}

}  // namespace uroce::core
