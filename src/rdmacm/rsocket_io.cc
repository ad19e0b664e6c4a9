// rsockets: waiting (a blocked call, rpoll, rselect) and the exported I/O
// calls. A socket wakes its waiter through two fds: its CQ's completion
// channel (armed before sleeping) and its CM event channel.
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>

#include <cerrno>
#include <vector>

#include "common/export.h"
#include "rdmacm/rsocket.h"

namespace uroce::rdmacm::rs {

namespace {

constexpr int64_t kSpinNs = 10'000;  // poll the CQ this long before sleeping
constexpr int kSleepSliceMs = 1000;  // a sleeping wait looks again at least this often

int64_t now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

/// Takes the completion events that woke the CQ (the CQ is then unarmed).
void take_cq_events(Rsocket* rs) {
  if (!rs->cch) return;
  ibv_cq* cq;
  void* ctx;
  while (ibv_get_cq_event(rs->cch, &cq, &ctx) == 0) {
    ibv_ack_cq_events(cq, 1);
    rs->armed = false;
  }
}

/// Progresses a socket without blocking: its open, its CQ, its CM events.
void progress(Rsocket* rs, std::unique_lock<std::mutex>& lk) {
  if (rs->state & kOpening) progress_open(rs, lk, true);
  if (rs->state & kOpening) return;
  progress_cq(rs);
  if (rs->id) drain_cm(rs);
}

/// Fills the fds the socket sleeps on; arms its CQ first.
void sleep_fds(Rsocket* rs, std::vector<pollfd>* out) {
  if (rs->cq && !rs->armed && ibv_req_notify_cq(rs->cq, 0) == 0) rs->armed = true;
  if (rs->cch) out->push_back({rs->cch->fd, POLLIN, 0});
  out->push_back({rs->ch->fd, POLLIN, 0});
}

/// Polls every entry once without sleeping; returns how many have events.
int check(pollfd* fds, nfds_t nfds) {
  int count = 0;
  for (nfds_t i = 0; i < nfds; i++) {
    Rsocket* rs = lookup(fds[i].fd);
    if (rs) {
      std::unique_lock lk(rs->mu);
      fds[i].revents = revents_of(rs, lk, fds[i].events);
    } else {
      fds[i].revents = 0;
      poll(&fds[i], 1, 0);
    }
    if (fds[i].revents) count++;
  }
  return count;
}

}  // namespace

int wait_until(Rsocket* rs, std::unique_lock<std::mutex>& lk, bool nonblock, bool (*test)(Rsocket*)) {
  const int64_t spin_end = now_ns() + kSpinNs;
  std::vector<pollfd> fds;
  for (;;) {
    progress(rs, lk);
    if (test(rs)) return 0;
    if (rs->state == kConnectError) {
      errno = rs->err ? rs->err : ECONNREFUSED;
      return -1;
    }
    if (nonblock) {
      errno = EWOULDBLOCK;
      return -1;
    }
    if (now_ns() < spin_end) {
      lk.unlock();
      __builtin_ia32_pause();
      lk.lock();
      continue;
    }
    if (rs->cq && !rs->armed) {
      if (ibv_req_notify_cq(rs->cq, 0) == 0) rs->armed = true;
      continue;  // look once more: a completion may have come before arming
    }
    fds.clear();
    sleep_fds(rs, &fds);
    lk.unlock();
    poll(fds.data(), fds.size(), kSleepSliceMs);
    lk.lock();
    take_cq_events(rs);
  }
}

short revents_of(Rsocket* rs, std::unique_lock<std::mutex>& lk, short events) {
  if (rs->state == kListening) {
    pollfd p{rs->ch->fd, POLLIN, 0};
    poll(&p, 1, 0);
    return short(p.revents & events);
  }
  progress(rs, lk);
  if (rs->state & (kConnected | kDisconnected | kError)) {
    short r = 0;
    if ((events & POLLIN) && (have_rdata(rs) || !(rs->state & kReadable))) r |= POLLIN;
    if ((events & POLLOUT) && can_send(rs)) r |= POLLOUT;
    // A closed connection hangs up once its data is read (TCP reports
    // data and the peer's close apart, and programs stop at POLLHUP;
    // rdma-core's rsockets set it with data still queued).
    if (!(rs->state & kConnected)) {
      if (!(rs->state & kDisconnected))
        r |= POLLERR;
      else if (!have_rdata(rs))
        r |= POLLHUP;
    }
    return r;
  }
  if (rs->state == kConnectError) return short((events & (POLLIN | POLLOUT)) | POLLERR);
  return 0;
}

}  // namespace uroce::rdmacm::rs

namespace rsi = uroce::rdmacm::rs;

UROCE_EXPORT int rpoll(pollfd* fds, nfds_t nfds, int timeout) {
  const int64_t start = rsi::now_ns();
  for (;;) {
    const int n = rsi::check(fds, nfds);
    if (n || timeout == 0) return n;
    if (rsi::now_ns() - start > rsi::kSpinNs) break;
  }
  std::vector<pollfd> sleep;
  for (;;) {
    sleep.clear();
    bool ready = false;
    for (nfds_t i = 0; i < nfds && !ready; i++) {
      rsi::Rsocket* rs = rsi::lookup(fds[i].fd);
      if (!rs) {
        sleep.push_back({fds[i].fd, fds[i].events, 0});
        continue;
      }
      std::unique_lock lk(rs->mu);
      rsi::sleep_fds(rs, &sleep);
      ready = rsi::revents_of(rs, lk, fds[i].events) != 0;  // armed: nothing is missed after this
    }
    if (ready) return rsi::check(fds, nfds);
    int slice = rsi::kSleepSliceMs;
    if (timeout > 0) {
      const int64_t left_ms = timeout - (rsi::now_ns() - start) / 1'000'000;
      if (left_ms <= 0) return rsi::check(fds, nfds);
      if (left_ms < slice) slice = int(left_ms);
    }
    if (poll(sleep.data(), sleep.size(), slice) < 0) return -1;
    for (nfds_t i = 0; i < nfds; i++) {
      if (rsi::Rsocket* rs = rsi::lookup(fds[i].fd)) {
        std::lock_guard lk(rs->mu);
        rsi::take_cq_events(rs);
      }
    }
    const int n = rsi::check(fds, nfds);
    if (n) return n;
  }
}

UROCE_EXPORT int rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, timeval* timeout) {
  std::vector<pollfd> fds;
  for (int fd = 0; fd < nfds; fd++) {
    short ev = 0;
    if (readfds && FD_ISSET(fd, readfds)) ev |= POLLIN;
    if (writefds && FD_ISSET(fd, writefds)) ev |= POLLOUT;
    if (exceptfds && FD_ISSET(fd, exceptfds)) ev |= POLLPRI;
    if (ev) fds.push_back({fd, ev, 0});
  }
  const int ms = timeout ? int(timeout->tv_sec * 1000 + timeout->tv_usec / 1000) : -1;
  const int n = rpoll(fds.data(), fds.size(), ms);
  if (n < 0) return n;
  if (readfds) FD_ZERO(readfds);
  if (writefds) FD_ZERO(writefds);
  if (exceptfds) FD_ZERO(exceptfds);
  int bits = 0;
  for (const pollfd& p : fds) {
    if (readfds && (p.events & POLLIN) && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
      FD_SET(p.fd, readfds);
      bits++;
    }
    if (writefds && (p.events & POLLOUT) && (p.revents & (POLLOUT | POLLERR))) {
      FD_SET(p.fd, writefds);
      bits++;
    }
    if (exceptfds && (p.events & POLLPRI) && (p.revents & POLLPRI)) {
      FD_SET(p.fd, exceptfds);
      bits++;
    }
  }
  return bits;
}

namespace {

rsi::Rsocket* stream_socket(int fd) {
  rsi::Rsocket* rs = rsi::lookup(fd);
  if (!rs) errno = EBADF;
  return rs;
}

}  // namespace

UROCE_EXPORT ssize_t rrecv(int fd, void* buf, size_t len, int flags) {
  rsi::Rsocket* rs = stream_socket(fd);
  if (!rs) return -1;
  iovec v{buf, len};
  return rsi::recv_iov(rs, &v, 1, flags);
}

UROCE_EXPORT ssize_t rrecvfrom(int fd, void* buf, size_t len, int flags, sockaddr* src, socklen_t* srclen) {
  const ssize_t n = rrecv(fd, buf, len, flags);
  if (n >= 0 && src && srclen) rgetpeername(fd, src, srclen);
  return n;
}

UROCE_EXPORT ssize_t rrecvmsg(int fd, msghdr* msg, int flags) {
  rsi::Rsocket* rs = stream_socket(fd);
  if (!rs) return -1;
  if (msg->msg_control && msg->msg_controllen) return errno = ENOTSUP, -1;
  return rsi::recv_iov(rs, msg->msg_iov, int(msg->msg_iovlen), flags);
}

UROCE_EXPORT ssize_t rread(int fd, void* buf, size_t count) { return rrecv(fd, buf, count, 0); }

UROCE_EXPORT ssize_t rreadv(int fd, const iovec* iov, int iovcnt) {
  rsi::Rsocket* rs = stream_socket(fd);
  if (!rs) return -1;
  return rsi::recv_iov(rs, iov, iovcnt, 0);
}

UROCE_EXPORT ssize_t rsend(int fd, const void* buf, size_t len, int flags) {
  rsi::Rsocket* rs = stream_socket(fd);
  if (!rs) return -1;
  iovec v{const_cast<void*>(buf), len};
  return rsi::send_iov(rs, &v, 1, flags);
}

UROCE_EXPORT ssize_t rsendto(int fd, const void* buf, size_t len, int flags, const sockaddr* dst,
                             socklen_t dstlen) {
  if (dst || dstlen) return errno = EISCONN, -1;
  return rsend(fd, buf, len, flags);
}

UROCE_EXPORT ssize_t rsendmsg(int fd, const msghdr* msg, int flags) {
  rsi::Rsocket* rs = stream_socket(fd);
  if (!rs) return -1;
  if (msg->msg_control && msg->msg_controllen) return errno = ENOTSUP, -1;
  return rsi::send_iov(rs, msg->msg_iov, int(msg->msg_iovlen), flags);
}

UROCE_EXPORT ssize_t rwrite(int fd, const void* buf, size_t count) { return rsend(fd, buf, count, 0); }

UROCE_EXPORT ssize_t rwritev(int fd, const iovec* iov, int iovcnt) {
  rsi::Rsocket* rs = stream_socket(fd);
  if (!rs) return -1;
  return rsi::send_iov(rs, iov, iovcnt, 0);
}
