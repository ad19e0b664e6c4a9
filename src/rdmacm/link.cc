#include "rdmacm/link.h"

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "common/unix_socket.h"
#include "contract/control_protocol.h"

namespace uroce::rdmacm {
namespace {

using cmproto::Msg;
using cmproto::Op;

/// How long a request may wait for uroced's answer.
constexpr auto kCallTimeout = std::chrono::seconds(30);

struct Link {
  int fd = -1;  // events from uroced (the reader's)
  bool dead = false;
  uint64_t token = 0;  // what uroced answered the open with: names this link to the call channel
  std::mutex mu;       // `dead`, `ids`, and the ids' lifetime against events
  std::unordered_map<uint64_t, CmId*> ids;  // handle -> id
  // The call channel: requests and their answers, read by the caller itself
  // (no hand-off through the reader thread), in one order with the posts.
  std::mutex call_mu;  // everything below
  int cfd = -1;
  uint64_t next_seq = 1;
};

Link* g_link = nullptr;
std::mutex g_link_mu;

void reader(Link* l) {
  // A thread's first allocation sets up its malloc cache and arena (an
  // mmap and page faults: ~50 us on a VM): done now, not in the first
  // event's path (a connection's answer).
  free(malloc(64));
  for (;;) {
    Msg m;
    ssize_t n = recv(l->fd, &m, sizeof(m), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n != ssize_t(sizeof(m))) break;
    if (m.op != uint32_t(Op::kEvent)) continue;  // an answer on the event link: nobody waits
    std::unique_lock<std::mutex> g(l->mu);
    on_cm_event(m);
  }
  std::lock_guard<std::mutex> g(l->mu);
  l->dead = true;
}

/// Connects to uroced's CM and sends `open`; the answer in *ans. -1 or the fd.
int open_cm(const Msg& open, Msg* ans) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr;
  socklen_t alen = make_abstract_addr(control::daemon_socket_name(), &addr);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), alen) != 0 ||
      send(fd, &open, sizeof(open), MSG_NOSIGNAL) != ssize_t(sizeof(open)) ||
      recv(fd, ans, sizeof(*ans), 0) != ssize_t(sizeof(*ans)) || ans->status != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/// The call channel, opened at first need (call_mu held). -1: none.
int call_fd(Link* l) {
  if (l->cfd >= 0) return l->cfd;
  Msg open{};
  open.op = uint32_t(Op::kCmOpen);
  open.arg = cmproto::kVersion;
  open.event = cmproto::kCallChannel;
  open.listen_handle = l->token;
  Msg ans{};
  l->cfd = open_cm(open, &ans);
  if (l->cfd >= 0) {
    const timeval tv{std::chrono::duration_cast<std::chrono::seconds>(kCallTimeout).count(), 0};
    setsockopt(l->cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  return l->cfd;
}

/// After a failed exchange the channel's order is lost: the next call opens another.
void drop_call_fd(Link* l) {
  close(l->cfd);
  l->cfd = -1;
}

void after_fork_child() {
  // The child has the descriptor but not the reader: it starts afresh.
  g_link = nullptr;
  new (&g_link_mu) std::mutex();
}

Link* link() {
  std::lock_guard<std::mutex> g(g_link_mu);
  if (g_link) return g_link;
  static bool atfork = (pthread_atfork(nullptr, nullptr, after_fork_child), true);
  (void)atfork;
  Msg open{};
  open.op = uint32_t(Op::kCmOpen);
  open.arg = cmproto::kVersion;
  Msg ans{};
  const int fd = open_cm(open, &ans);
  if (fd < 0) {
    errno = ENODEV;
    return nullptr;
  }
  timeval tv{0, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  auto* l = new Link();  // lives for the process, as its reader does
  l->fd = fd;
  l->token = ans.handle;
  std::thread(reader, l).detach();
  g_link = l;
  return l;
}

}  // namespace

int cm_call(Msg* m) {
  Link* l = link();
  if (!l) return ENODEV;
  {
    std::lock_guard<std::mutex> g(l->mu);
    if (l->dead) return ECONNRESET;
  }
  std::lock_guard<std::mutex> c(l->call_mu);
  const int fd = call_fd(l);
  if (fd < 0) return ECONNRESET;
  const uint64_t seq = l->next_seq++;
  m->seq = seq;
  if (send(fd, m, sizeof(*m), MSG_NOSIGNAL) != ssize_t(sizeof(*m))) {
    drop_call_fd(l);
    return ECONNRESET;
  }
  for (;;) {
    Msg r;
    const ssize_t n = recv(fd, &r, sizeof(r), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n != ssize_t(sizeof(r))) {
      const int err = (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) ? ETIMEDOUT : ECONNRESET;
      drop_call_fd(l);
      return err;
    }
    if (r.seq != seq) continue;  // an answer to a post (an older uroced answers those)
    *m = r;
    return m->status;
  }
}

int cm_post(Msg* m) {
  Link* l = link();
  if (!l) return ENODEV;
  std::lock_guard<std::mutex> c(l->call_mu);
  const int fd = call_fd(l);
  if (fd < 0) return ECONNRESET;
  m->seq = 0;
  if (send(fd, m, sizeof(*m), MSG_NOSIGNAL) == ssize_t(sizeof(*m))) return 0;
  drop_call_fd(l);
  return ECONNRESET;
}

int cm_ensure_handle(CmId* id) {
  if (id->handle) return 0;
  Msg m{};
  m.op = uint32_t(Op::kCreateId);
  m.ps = uint32_t(id->pub.ps);
  if (int rc = cm_call(&m); rc != 0) return rc;
  Link* l = g_link;
  std::lock_guard<std::mutex> g(l->mu);
  id->handle = m.handle;
  l->ids[m.handle] = id;
  return 0;
}

void cm_adopt_handle(CmId* id, uint64_t handle) {
  // Called on the reader thread, which holds l->mu.
  id->handle = handle;
  g_link->ids[handle] = id;
}

void cm_drop_handle(CmId* id) {
  if (!id->handle) return;
  Msg m{};
  m.op = uint32_t(Op::kDestroyId);
  m.handle = id->handle;
  cm_post(&m);  // nothing to wait for: uroced takes it in order, and no event for it comes through
  Link* l = g_link;
  std::lock_guard<std::mutex> g(l->mu);
  l->ids.erase(id->handle);
  id->handle = 0;
}

CmId* cm_find(uint64_t h) {
  auto it = g_link->ids.find(h);
  return it == g_link->ids.end() ? nullptr : it->second;
}

}  // namespace uroce::rdmacm
