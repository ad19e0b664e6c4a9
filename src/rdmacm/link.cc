#include "rdmacm/link.h"

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "common/unix_socket.h"
#include "core/control_protocol.h"

namespace uroce::rdmacm {
namespace {

using cmproto::Msg;
using cmproto::Op;

/// How long a request may wait for uroced's answer.
constexpr auto kCallTimeout = std::chrono::seconds(30);

struct Link {
  int fd = -1;
  bool dead = false;
  uint64_t next_seq = 1;
  std::mutex mu;  // everything below, and the ids' lifetime against events
  std::condition_variable answered;
  std::map<uint64_t, Msg*> waiting;         // seq -> where the answer goes
  std::map<uint64_t, bool> done;            // seq -> answered
  std::unordered_map<uint64_t, CmId*> ids;  // handle -> id
  std::mutex send_mu;
};

Link* g_link = nullptr;
std::mutex g_link_mu;

void reader(Link* l) {
  for (;;) {
    Msg m;
    ssize_t n = recv(l->fd, &m, sizeof(m), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n != ssize_t(sizeof(m))) break;
    std::unique_lock<std::mutex> g(l->mu);
    if (m.op == uint32_t(Op::kEvent)) {
      on_cm_event(m);
      continue;
    }
    auto it = l->waiting.find(m.seq);
    if (it == l->waiting.end()) continue;  // an answer nobody waits for (cm_post)
    *it->second = m;
    l->done[m.seq] = true;
    l->answered.notify_all();
  }
  std::lock_guard<std::mutex> g(l->mu);
  l->dead = true;
  l->answered.notify_all();
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
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return nullptr;
  sockaddr_un addr;
  socklen_t alen = make_abstract_addr(control::daemon_socket_name(), &addr);
  Msg open{};
  open.op = uint32_t(Op::kCmOpen);
  open.arg = cmproto::kVersion;
  Msg ans{};
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), alen) != 0 ||
      send(fd, &open, sizeof(open), MSG_NOSIGNAL) != ssize_t(sizeof(open)) ||
      recv(fd, &ans, sizeof(ans), 0) != ssize_t(sizeof(ans)) || ans.status != 0) {
    close(fd);
    errno = ENODEV;
    return nullptr;
  }
  tv = {0, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  auto* l = new Link();  // lives for the process, as its reader does
  l->fd = fd;
  std::thread(reader, l).detach();
  g_link = l;
  return l;
}

int send_locked(Link* l, Msg* m) {
  std::lock_guard<std::mutex> g(l->send_mu);
  return send(l->fd, m, sizeof(*m), MSG_NOSIGNAL) == ssize_t(sizeof(*m)) ? 0 : ECONNRESET;
}

}  // namespace

int cm_call(Msg* m) {
  Link* l = link();
  if (!l) return ENODEV;
  std::unique_lock<std::mutex> g(l->mu);
  if (l->dead) return ECONNRESET;
  const uint64_t seq = l->next_seq++;
  m->seq = seq;
  l->waiting[seq] = m;
  g.unlock();
  int rc = send_locked(l, m);
  g.lock();
  if (rc == 0 && !l->answered.wait_for(g, kCallTimeout, [&] { return l->done.count(seq) || l->dead; }))
    rc = ETIMEDOUT;
  if (rc == 0 && !l->done.count(seq)) rc = ECONNRESET;
  l->waiting.erase(seq);
  l->done.erase(seq);
  return rc != 0 ? rc : m->status;
}

int cm_post(Msg* m) {
  Link* l = g_link;  // the reader runs: the link exists
  if (!l) return ENODEV;
  m->seq = 0;
  return send_locked(l, m);
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
  cm_call(&m);
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
