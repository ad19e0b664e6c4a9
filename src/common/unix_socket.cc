#include "common/unix_socket.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace uroce {

socklen_t make_abstract_addr(const std::string& name, sockaddr_un* addr) {
  memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  size_t n = std::min(name.size(), sizeof(addr->sun_path) - 1);
  memcpy(addr->sun_path + 1, name.data(), n);
  return socklen_t(offsetof(sockaddr_un, sun_path) + 1 + n);
}

ssize_t send_msg_fd(int sock, const void* buf, size_t len, int fd) {
  iovec iov{const_cast<void*>(buf), len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
  if (fd >= 0) {
    memset(cbuf, 0, sizeof(cbuf));
    msg.msg_control = cbuf;
    msg.msg_controllen = sizeof(cbuf);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  for (;;) {
    ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno != EINTR) return -errno;
  }
}

ssize_t recv_msg_fd(int sock, void* buf, size_t len, int* fd, int timeout_ms) {
  if (fd) *fd = -1;
  int flags = MSG_CMSG_CLOEXEC;
  if (timeout_ms == 0) {
    flags |= MSG_DONTWAIT;  // no poll() first: one system call per message, not two
  } else if (timeout_ms > 0) {
    pollfd p{sock, POLLIN, 0};
    int r;
    do {
      r = poll(&p, 1, timeout_ms);
    } while (r < 0 && errno == EINTR);
    if (r == 0) return -ETIMEDOUT;
    if (r < 0) return -errno;
  }
  iovec iov{buf, len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof(cbuf);
  ssize_t n;
  do {
    n = recvmsg(sock, &msg, flags);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return (errno == EAGAIN && timeout_ms == 0) ? -ETIMEDOUT : -errno;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int got;
      memcpy(&got, CMSG_DATA(c), sizeof(int));
      if (fd)
        *fd = got;
      else
        close(got);
    }
  }
  return n;
}

}  // namespace uroce
