// rsockets: the socket-like API librdmacm carries (rdma/rsocket.h), which
// Debian's librspreload.so maps every socket call of a program onto.
//
// Not built yet (issue 16): each call fails with EOPNOTSUPP. librspreload
// falls back to the kernel's sockets when rsocket() fails.
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/select.h>

#include <cerrno>

#include "common/export.h"

namespace {

template <typename T>
T not_yet() {
  errno = EOPNOTSUPP;
  return T(-1);
}

}  // namespace

UROCE_EXPORT int rsocket(int, int, int) { return not_yet<int>(); }
UROCE_EXPORT int rbind(int, const sockaddr*, socklen_t) { return not_yet<int>(); }
UROCE_EXPORT int rlisten(int, int) { return not_yet<int>(); }
UROCE_EXPORT int raccept(int, sockaddr*, socklen_t*) { return not_yet<int>(); }
UROCE_EXPORT int rconnect(int, const sockaddr*, socklen_t) { return not_yet<int>(); }
UROCE_EXPORT int rshutdown(int, int) { return not_yet<int>(); }
UROCE_EXPORT int rclose(int) { return not_yet<int>(); }
UROCE_EXPORT ssize_t rrecv(int, void*, size_t, int) { return not_yet<ssize_t>(); }
UROCE_EXPORT ssize_t rrecvfrom(int, void*, size_t, int, sockaddr*, socklen_t*) { return not_yet<ssize_t>(); }
UROCE_EXPORT ssize_t rrecvmsg(int, msghdr*, int) { return not_yet<ssize_t>(); }
UROCE_EXPORT ssize_t rsend(int, const void*, size_t, int) { return not_yet<ssize_t>(); }
UROCE_EXPORT ssize_t rsendto(int, const void*, size_t, int, const sockaddr*, socklen_t) {
  return not_yet<ssize_t>();
}
UROCE_EXPORT ssize_t rsendmsg(int, const msghdr*, int) { return not_yet<ssize_t>(); }
UROCE_EXPORT ssize_t rread(int, void*, size_t) { return not_yet<ssize_t>(); }
UROCE_EXPORT ssize_t rreadv(int, const iovec*, int) { return not_yet<ssize_t>(); }
UROCE_EXPORT ssize_t rwrite(int, const void*, size_t) { return not_yet<ssize_t>(); }
UROCE_EXPORT ssize_t rwritev(int, const iovec*, int) { return not_yet<ssize_t>(); }
UROCE_EXPORT int rpoll(pollfd*, nfds_t, int) { return not_yet<int>(); }
UROCE_EXPORT int rselect(int, fd_set*, fd_set*, fd_set*, timeval*) { return not_yet<int>(); }
UROCE_EXPORT int rgetpeername(int, sockaddr*, socklen_t*) { return not_yet<int>(); }
UROCE_EXPORT int rgetsockname(int, sockaddr*, socklen_t*) { return not_yet<int>(); }
UROCE_EXPORT int rsetsockopt(int, int, int, const void*, socklen_t) { return not_yet<int>(); }
UROCE_EXPORT int rgetsockopt(int, int, int, void*, socklen_t*) { return not_yet<int>(); }
UROCE_EXPORT int rfcntl(int, int, ...) { return not_yet<int>(); }
UROCE_EXPORT off_t riomap(int, void*, size_t, int, int, off_t) { return not_yet<off_t>(); }
UROCE_EXPORT int riounmap(int, void*, size_t) { return not_yet<int>(); }
UROCE_EXPORT size_t riowrite(int, const void*, size_t, off_t, int) { return not_yet<size_t>(); }
