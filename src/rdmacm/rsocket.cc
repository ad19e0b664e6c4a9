// rsockets' life cycle: the socket table, bind/listen/accept/connect, and
// shutdown/close (rsocket.h says what they exchange).
#include "rdmacm/rsocket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "common/export.h"

namespace uroce::rdmacm::rs {

namespace {

// The table: socket number (an fd) -> Rsocket, in chunks made on demand.
constexpr int kChunk = 1024, kChunks = 1024;
std::atomic<std::atomic<Rsocket*>*> g_chunks[kChunks];
std::mutex g_table_mu;

std::atomic<Rsocket*>* slot(int fd, bool make) {
  if (fd < 0 || fd >= kChunk * kChunks) return nullptr;
  std::atomic<Rsocket*>* c = g_chunks[fd / kChunk].load(std::memory_order_acquire);
  if (!c && make) {
    std::lock_guard lk(g_table_mu);
    c = g_chunks[fd / kChunk].load(std::memory_order_relaxed);
    if (!c) {
      c = new std::atomic<Rsocket*>[kChunk]();
      g_chunks[fd / kChunk].store(c, std::memory_order_release);
    }
  }
  return c ? &c[fd % kChunk] : nullptr;
}

/// A new socket with its own event channel (whose fd is its number).
Rsocket* make_socket(int domain, const Rsocket* inherit) {
  auto* rs = new Rsocket;
  rs->domain = domain;
  if (inherit) {
    rs->sbuf_size = inherit->sbuf_size;
    rs->rbuf_size = inherit->rbuf_size;
    rs->sq_size = inherit->sq_size;
    rs->rq_size = inherit->rq_size;
    rs->sq_inline = inherit->sq_inline;
    rs->iomap_size = inherit->iomap_size;
    rs->fs_flags = inherit->fs_flags;
    rs->fd_flags = inherit->fd_flags;
  }
  rs->ch = rdma_create_event_channel();
  if (!rs->ch) {
    delete rs;
    return nullptr;
  }
  fcntl(rs->ch->fd, F_SETFL, fcntl(rs->ch->fd, F_GETFL) | O_NONBLOCK);
  rs->index = rs->ch->fd;
  return rs;
}

void publish(Rsocket* rs) { slot(rs->index, true)->store(rs, std::memory_order_release); }

void free_socket(Rsocket* rs) {
  if (std::atomic<Rsocket*>* s = slot(rs->index, false)) s->store(nullptr, std::memory_order_release);
  if (rs->id && rs->id->qp) rdma_disconnect(rs->id);  // the peer's CM hears of it
  destroy_ep(rs);
  if (rs->id) rdma_destroy_id(rs->id);
  if (rs->ch) rdma_destroy_event_channel(rs->ch);
  delete rs;
}

/// errno for an event that ends an open, as rdma-core's synchronous calls
/// report it.
int open_error(const rdma_cm_event* ev) {
  if (ev->event == RDMA_CM_EVENT_REJECTED) return ECONNREFUSED;
  if (ev->status < 0) return -ev->status;
  return ev->status ? ev->status : ECONNREFUSED;
}

void open_failed(Rsocket* rs, int err) {
  rs->state = kConnectError;
  rs->opening = Opening::kNone;
  rs->err = err;
}

/// Connects once the route is known: endpoint, then the request with ConnData.
void start_connect(Rsocket* rs) {
  if (create_ep(rs) != 0) return open_failed(rs, errno);
  ConnData cd;
  format_conn(rs, &cd);
  rdma_conn_param p{};
  p.private_data = &cd;
  p.private_data_len = sizeof cd;
  p.flow_control = 1;
  p.retry_count = 7;
  p.rnr_retry_count = 7;
  if (rdma_connect(rs->id, &p) != 0) return open_failed(rs, errno);
  rs->opening = Opening::kConnect;
}

/// One CM event of a socket being opened (acknowledges it).
void on_open_event(Rsocket* rs, rdma_cm_event* ev) {
  const rdma_cm_event_type type = ev->event;
  ConnData cd{};
  const bool cd_ok = ev->param.conn.private_data && ev->param.conn.private_data_len >= sizeof cd;
  if (cd_ok) memcpy(&cd, ev->param.conn.private_data, sizeof cd);
  const int err = open_error(ev);
  rdma_ack_cm_event(ev);
  switch (type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rs->opening != Opening::kAddr) return;
      if (rdma_resolve_route(rs->id, 2000) != 0) return open_failed(rs, errno);
      rs->opening = Opening::kRoute;
      return;
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      if (rs->opening == Opening::kRoute) start_connect(rs);
      return;
    case RDMA_CM_EVENT_ESTABLISHED:
      if (rs->opening == Opening::kConnect) {
        if (!cd_ok || cd.version != 1) return open_failed(rs, ENOTSUP);
        save_conn(rs, cd);
      } else if (rs->opening != Opening::kAccept) {
        return;
      }
      rs->state = kConnectRdwr;
      rs->opening = Opening::kNone;
      return;
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return open_failed(rs, err);
    case RDMA_CM_EVENT_DISCONNECTED:
      return open_failed(rs, ECONNRESET);
    default:
      return;
  }
}

}  // namespace

Rsocket* lookup(int fd) {
  std::atomic<Rsocket*>* s = slot(fd, false);
  return s ? s->load(std::memory_order_acquire) : nullptr;
}

int progress_open(Rsocket* rs, std::unique_lock<std::mutex>& lk, bool nonblock) {
  for (;;) {
    rdma_cm_event* ev;
    while ((rs->state & kOpening) && rdma_get_cm_event(rs->ch, &ev) == 0) on_open_event(rs, ev);
    if (!(rs->state & kOpening) && rs->opening == Opening::kNone) {
      if (rs->state & kConnected) return 0;
      errno = rs->err ? rs->err : ENOTCONN;
      return -1;
    }
    if (rs->state == kConnectError) {
      errno = rs->err;
      return -1;
    }
    if (nonblock) {
      errno = EINPROGRESS;
      return -1;
    }
    pollfd p{rs->ch->fd, POLLIN, 0};
    lk.unlock();
    poll(&p, 1, 1000);
    lk.lock();
  }
}

void drain_cm(Rsocket* rs) {
  rdma_cm_event* ev;
  while (rdma_get_cm_event(rs->ch, &ev) == 0) {
    const rdma_cm_event_type type = ev->event;
    rdma_ack_cm_event(ev);
    if (type == RDMA_CM_EVENT_DISCONNECTED || type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
      if (rs->state & kConnected) rs->state = kDisconnected;
      rdma_disconnect(rs->id);
    }
  }
}

}  // namespace uroce::rdmacm::rs

namespace rsn = uroce::rdmacm::rs;
using rsn::Opening;
using rsn::Rsocket;

UROCE_EXPORT int rsocket(int domain, int type, int protocol) {
  const int kind = type & ~(SOCK_CLOEXEC | SOCK_NONBLOCK);
  if ((domain != AF_INET && domain != AF_INET6) || kind != SOCK_STREAM ||
      (protocol && protocol != IPPROTO_TCP))
    return errno = ENOTSUP, -1;
  Rsocket* rs = rsn::make_socket(domain, nullptr);
  if (!rs) return -1;
  rs->fd_flags = (type & SOCK_CLOEXEC) ? FD_CLOEXEC : 0;
  rs->fs_flags = (type & SOCK_NONBLOCK) ? O_NONBLOCK : 0;
  if (rdma_create_id(rs->ch, &rs->id, rs, RDMA_PS_TCP) != 0) {
    const int err = errno;
    rsn::free_socket(rs);
    return errno = err, -1;
  }
  rs->id->route.addr.src_addr.sa_family = sa_family_t(domain);
  rsn::publish(rs);
  return rs->index;
}

UROCE_EXPORT int rbind(int fd, const sockaddr* addr, socklen_t) {
  Rsocket* rs = rsn::lookup(fd);
  if (!rs) return errno = EBADF, -1;
  std::lock_guard lk(rs->mu);
  if (rdma_bind_addr(rs->id, const_cast<sockaddr*>(addr)) != 0) return -1;
  rs->state = rsn::kBound;
  return 0;
}

UROCE_EXPORT int rlisten(int fd, int backlog) {
  Rsocket* rs = rsn::lookup(fd);
  if (!rs) return errno = EBADF, -1;
  std::lock_guard lk(rs->mu);
  if (rs->state == rsn::kListening) return 0;
  if (rdma_listen(rs->id, backlog) != 0) return -1;
  rs->state = rsn::kListening;
  return 0;
}

// Takes the next connection request: a new socket on its own channel, its
// endpoint made, the request accepted with this side's ConnData. It is
// connected when the CM says ESTABLISHED (its first call waits for that).
UROCE_EXPORT int raccept(int fd, sockaddr* addr, socklen_t* addrlen) {
  Rsocket* ls = rsn::lookup(fd);
  if (!ls) return errno = EBADF, -1;
  std::unique_lock lk(ls->mu);
  if (ls->state != rsn::kListening) return errno = EBADF, -1;
  for (;;) {
    rdma_cm_event* ev;
    if (rdma_get_cm_event(ls->ch, &ev) != 0) {
      if (errno != EAGAIN) return -1;
      if (ls->fs_flags & O_NONBLOCK) return errno = EAGAIN, -1;
      pollfd p{ls->ch->fd, POLLIN, 0};
      lk.unlock();
      const int n = poll(&p, 1, 1000);
      lk.lock();
      if (n < 0 && errno == EINTR) return -1;
      if (ls->state != rsn::kListening) return errno = EBADF, -1;
      continue;
    }
    if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
      rdma_ack_cm_event(ev);
      continue;
    }
    rdma_cm_id* id = ev->id;
    rdma_conn_param param = ev->param.conn;
    rsn::ConnData creq{};
    const bool ok = param.private_data && param.private_data_len >= sizeof creq;
    if (ok) memcpy(&creq, param.private_data, sizeof creq);
    rdma_ack_cm_event(ev);
    Rsocket* rs = ok && creq.version == 1 ? rsn::make_socket(ls->domain, ls) : nullptr;
    if (!rs) {
      rdma_reject(id, nullptr, 0);
      rdma_destroy_id(id);
      continue;
    }
    rs->id = id;
    id->context = rs;
    rsn::ConnData cresp;
    if (rdma_migrate_id(id, rs->ch) != 0 || rsn::create_ep(rs) != 0) goto refuse;
    rsn::save_conn(rs, creq);
    rsn::format_conn(rs, &cresp);
    param.private_data = &cresp;
    param.private_data_len = sizeof cresp;
    if (rdma_accept(id, &param) != 0) goto refuse;
    rs->state = rsn::kOpening;
    rs->opening = Opening::kAccept;
    rsn::publish(rs);
    if (addr && addrlen) {
      const sockaddr* peer = rdma_get_peer_addr(id);
      const socklen_t len = peer->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
      memcpy(addr, peer, std::min(*addrlen, len));
      *addrlen = len;
    }
    return rs->index;
  refuse:
    rdma_reject(id, nullptr, 0);
    rsn::free_socket(rs);
  }
}

UROCE_EXPORT int rconnect(int fd, const sockaddr* addr, socklen_t addrlen) {
  Rsocket* rs = rsn::lookup(fd);
  if (!rs) return errno = EBADF, -1;
  std::unique_lock lk(rs->mu);
  if (rs->state & rsn::kConnected) return errno = EISCONN, -1;
  if (rs->state == rsn::kListening) return errno = EINVAL, -1;
  if (rs->state == rsn::kInit || rs->state == rsn::kBound) {
    if (addrlen > sizeof(rs->id->route.addr.dst_storage)) return errno = EINVAL, -1;
    sockaddr_storage dst{};
    memcpy(&dst, addr, addrlen);
    if (rdma_resolve_addr(rs->id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000) != 0) return -1;
    rs->state = rsn::kOpening;
    rs->opening = Opening::kAddr;
  } else if (!(rs->state & rsn::kOpening)) {
    return errno = rs->state == rsn::kConnectError ? rs->err : EINVAL, -1;
  }
  return rsn::progress_open(rs, lk, rs->fs_flags & O_NONBLOCK);
}

UROCE_EXPORT int rshutdown(int fd, int how) {
  Rsocket* rs = rsn::lookup(fd);
  if (!rs) return errno = EBADF, -1;
  std::unique_lock lk(rs->mu);
  int rc = 0;
  if (rs->state & rsn::kConnected) {
    uint32_t ctrl = rsn::kCtrlDisconnect;
    bool tell = true;
    if (how == SHUT_RDWR) {
      rs->state &= ~(rsn::kReadable | rsn::kWritable);
    } else if (how == SHUT_WR) {
      rs->state &= ~rsn::kWritable;
      if (rs->state & rsn::kReadable) ctrl = rsn::kCtrlShutdown;
    } else {
      rs->state &= ~rsn::kReadable;
      tell = !(rs->state & rsn::kWritable);
    }
    if (tell) rc = rsn::send_ctrl(rs, lk, ctrl);
  }
  // Let what was posted finish (the DISCONNECT's completion ends the
  // connection; a dead peer ends it with an error).
  if (rs->state & rsn::kConnected) rsn::wait_until(rs, lk, false, rsn::all_sends_done);
  if (rs->state & rsn::kDisconnected) rdma_disconnect(rs->id);
  return rc;
}

UROCE_EXPORT int rclose(int fd) {
  Rsocket* rs = rsn::lookup(fd);
  if (!rs) return errno = EBADF, -1;
  if (rs->state & rsn::kConnected) rshutdown(fd, SHUT_RDWR);
  rsn::free_socket(rs);
  return 0;
}
