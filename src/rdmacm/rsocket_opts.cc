// rsockets: socket options, fcntl and names. The options librdmacm's rsockets
// take, with their meaning there: SO_SNDBUF/SO_RCVBUF size the rings
// (doubled, as Linux reports), SOL_RDMA's RDMA_SQSIZE, RDMA_RQSIZE,
// RDMA_INLINE and RDMA_IOMAPSIZE size the QP and the iomap table before
// connecting; the TCP options a program sets for a kernel socket are taken
// and remembered. SO_KEEPALIVE is remembered but sends nothing: a dead peer
// shows up through RC retransmission and the CM (DISCONNECTED).
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/rsocket.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstring>

#include "common/export.h"
#include "rdmacm/rsocket.h"

namespace rso = uroce::rdmacm::rs;
using rso::Rsocket;

namespace {

void set_bit(uint64_t* opts, int name, bool on) {
  if (name < 0 || name >= 64) return;
  if (on)
    *opts |= uint64_t(1) << name;
  else
    *opts &= ~(uint64_t(1) << name);
}

bool has_bit(uint64_t opts, int name) { return name >= 0 && name < 64 && (opts >> name & 1); }

int int_of(const void* v, socklen_t len) {
  int x = 0;
  memcpy(&x, v, std::min<socklen_t>(len, sizeof x));
  return x;
}

void put_int(void* v, socklen_t* len, int x) {
  memcpy(v, &x, std::min<socklen_t>(*len, sizeof x));
  *len = sizeof x;
}

void copy_addr(sockaddr* dst, socklen_t* len, const sockaddr* src) {
  const socklen_t n = src->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  memcpy(dst, src, std::min(*len, n));
  *len = n;
}

}  // namespace

UROCE_EXPORT int rsetsockopt(int fd, int level, int name, const void* val, socklen_t len) {
  Rsocket* rs = rso::lookup(fd);
  if (!rs) return errno = EBADF, -1;
  if (!val || len < sizeof(int)) return errno = EINVAL, -1;
  std::lock_guard lk(rs->mu);
  const int v = int_of(val, len);
  switch (level) {
    case SOL_SOCKET:
      switch (name) {
        case SO_REUSEADDR:
          rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, const_cast<void*>(val),
                          sizeof(int));
          set_bit(&rs->so_opts, name, v);
          return 0;
        case SO_RCVBUF:
          if (!rs->rbuf) rs->rbuf_size = std::max<uint32_t>(uint32_t(v) << 1, 2 * rso::kSendLowWater);
          return 0;
        case SO_SNDBUF:
          if (!rs->sbuf) rs->sbuf_size = std::max<uint32_t>(uint32_t(v) << 1, 2 * rso::kSendLowWater);
          return 0;
        case SO_LINGER:
          if (len < sizeof(linger)) return errno = EINVAL, -1;
          // Kept inverted, as rdma-core does: the default (0) reads as on.
          set_bit(&rs->so_opts, name, !static_cast<const linger*>(val)->l_onoff);
          return 0;
        case SO_KEEPALIVE:
        case SO_OOBINLINE:
          set_bit(&rs->so_opts, name, v);
          return 0;
        default:
          return errno = ENOTSUP, -1;
      }
    case IPPROTO_IP:
      if (name != IP_TOS) return errno = ENOTSUP, -1;
      rs->ip_tos = v;
      return rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, const_cast<void*>(val),
                             sizeof(uint8_t));
    case IPPROTO_TCP:
      switch (name) {
        case TCP_KEEPIDLE:
          if (v <= 0) return errno = EINVAL, -1;
          rs->keepalive_time = v;
          set_bit(&rs->tcp_opts, name, true);
          return 0;
        case TCP_NODELAY:
          set_bit(&rs->tcp_opts, name, v);
          return 0;
        case TCP_KEEPCNT:
        case TCP_KEEPINTVL:
        case TCP_MAXSEG:
        case TCP_CONGESTION:
          return 0;  // a reliable connection has none of these
        default:
          return errno = ENOTSUP, -1;
      }
    case IPPROTO_IPV6:
      if (name != IPV6_V6ONLY) return errno = ENOTSUP, -1;
      set_bit(&rs->ipv6_opts, name, v);
      return rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, const_cast<void*>(val),
                             sizeof(int));
    case SOL_RDMA:
      if (rs->state >= rso::kOpening) return errno = EINVAL, -1;
      switch (name) {
        case RDMA_SQSIZE:
          rs->sq_size = uint16_t(std::min<uint32_t>(uint32_t(v), rso::kQpMax));
          return 0;
        case RDMA_RQSIZE:
          rs->rq_size = uint16_t(std::min<uint32_t>(uint32_t(v), rso::kQpMax));
          return 0;
        case RDMA_INLINE:
          rs->sq_inline = uint16_t(std::min<uint32_t>(uint32_t(v), rso::kQpMax));
          return 0;
        case RDMA_IOMAPSIZE: {
          // Sizes above 128 travel scaled by 256 in ConnData: keep what survives that.
          const uint32_t want = uint32_t(std::max(v, 0));
          rs->iomap_size = uint16_t(want <= 128 ? want : std::min<uint32_t>(want >> 8, 127) << 8);
          return 0;
        }
        default:
          return errno = ENOTSUP, -1;
      }
    default:
      return errno = ENOTSUP, -1;
  }
}

UROCE_EXPORT int rgetsockopt(int fd, int level, int name, void* val, socklen_t* len) {
  Rsocket* rs = rso::lookup(fd);
  if (!rs) return errno = EBADF, -1;
  if (!val || !len) return errno = EINVAL, -1;
  std::lock_guard lk(rs->mu);
  switch (level) {
    case SOL_SOCKET:
      switch (name) {
        case SO_REUSEADDR:
        case SO_KEEPALIVE:
        case SO_OOBINLINE:
          put_int(val, len, has_bit(rs->so_opts, name));
          return 0;
        case SO_RCVBUF:
          put_int(val, len, int(rs->rbuf_size));
          return 0;
        case SO_SNDBUF:
          put_int(val, len, int(rs->sbuf_size));
          return 0;
        case SO_LINGER: {
          if (*len < sizeof(linger)) return errno = EINVAL, -1;
          linger l{!has_bit(rs->so_opts, name), 0};
          memcpy(val, &l, sizeof l);
          *len = sizeof l;
          return 0;
        }
        case SO_ERROR:
          put_int(val, len, rs->err);
          rs->err = 0;
          return 0;
        case SO_TYPE:
          put_int(val, len, SOCK_STREAM);
          return 0;
        default:
          return errno = ENOTSUP, -1;
      }
    case IPPROTO_IP:
      if (name != IP_TOS) return errno = ENOTSUP, -1;
      put_int(val, len, rs->ip_tos);
      return 0;
    case IPPROTO_TCP:
      switch (name) {
        case TCP_NODELAY:
          put_int(val, len, has_bit(rs->tcp_opts, name));
          return 0;
        case TCP_KEEPIDLE:
          put_int(val, len, rs->keepalive_time);
          return 0;
        case TCP_KEEPCNT:
        case TCP_KEEPINTVL:
          put_int(val, len, 1);
          return 0;
        case TCP_MAXSEG:
          put_int(val, len,
                  rs->id && rs->id->route.num_paths ? 1 << (7 + rs->id->route.path_rec->mtu) : 2048);
          return 0;
        case TCP_INFO: {
          tcp_info info{};
          info.tcpi_state = (rs->state & rso::kConnected) ? TCP_ESTABLISHED : TCP_CLOSE;
          info.tcpi_snd_cwnd = rs->sq_size;
          memcpy(val, &info, std::min<socklen_t>(*len, sizeof info));
          *len = std::min<socklen_t>(*len, sizeof info);
          return 0;
        }
        default:
          return errno = ENOTSUP, -1;
      }
    case IPPROTO_IPV6:
      if (name != IPV6_V6ONLY) return errno = ENOTSUP, -1;
      put_int(val, len, has_bit(rs->ipv6_opts, name));
      return 0;
    case SOL_RDMA:
      switch (name) {
        case RDMA_SQSIZE:
          put_int(val, len, rs->sq_size);
          return 0;
        case RDMA_RQSIZE:
          put_int(val, len, rs->rq_size);
          return 0;
        case RDMA_INLINE:
          put_int(val, len, rs->sq_inline);
          return 0;
        case RDMA_IOMAPSIZE:
          put_int(val, len, rs->iomap_size);
          return 0;
        default:
          return errno = ENOTSUP, -1;
      }
    default:
      return errno = ENOTSUP, -1;
  }
}

UROCE_EXPORT int rfcntl(int fd, int cmd, ...) {
  Rsocket* rs = rso::lookup(fd);
  if (!rs) return errno = EBADF, -1;
  std::lock_guard lk(rs->mu);
  va_list ap;
  va_start(ap, cmd);
  int rc = 0;
  switch (cmd) {
    case F_GETFL:
      rc = rs->fs_flags;
      break;
    case F_SETFL:
      rs->fs_flags = va_arg(ap, int);  // every wait polls: no fd to change
      break;
    case F_GETFD:
      rc = rs->fd_flags;
      break;
    case F_SETFD:
      rs->fd_flags = va_arg(ap, int);
      break;
    default:
      errno = ENOTSUP;
      rc = -1;
  }
  va_end(ap);
  return rc;
}

UROCE_EXPORT int rgetpeername(int fd, sockaddr* addr, socklen_t* len) {
  Rsocket* rs = rso::lookup(fd);
  if (!rs) return errno = EBADF, -1;
  if (!addr || !len) return errno = EFAULT, -1;
  std::lock_guard lk(rs->mu);
  if (!(rs->state & (rso::kConnected | rso::kDisconnected | rso::kOpening))) return errno = ENOTCONN, -1;
  copy_addr(addr, len, rdma_get_peer_addr(rs->id));
  return 0;
}

UROCE_EXPORT int rgetsockname(int fd, sockaddr* addr, socklen_t* len) {
  Rsocket* rs = rso::lookup(fd);
  if (!rs) return errno = EBADF, -1;
  if (!addr || !len) return errno = EFAULT, -1;
  std::lock_guard lk(rs->mu);
  const sockaddr* local = rdma_get_local_addr(rs->id);
  if (local->sa_family == AF_UNSPEC) {
    // Not bound yet: the wildcard of the socket's family, as a kernel socket reports.
    sockaddr_storage any{};
    any.ss_family = sa_family_t(rs->domain);
    copy_addr(addr, len, reinterpret_cast<sockaddr*>(&any));
    return 0;
  }
  copy_addr(addr, len, local);
  return 0;
}
