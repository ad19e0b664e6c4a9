#include "memory/notify.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "common/unix_socket.h"
#include "contract/shm_layout.h"

namespace uroce::core {
namespace {

std::string endpoint_name(int32_t pid, uint32_t id) {
  return "uroce/ep/" + std::to_string(pid) + "/" + std::to_string(id);
}

int sender_socket() {
  static int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  return fd;
}

/// One event a thread's open NotifyBatch holds: by value (not the ring), as
/// the CQ may be destroyed before the batch ends.
struct Event {
  int32_t pid;
  uint32_t id;
  NotifyMsg msg;
};
constexpr int kMaxHeld = 32;

}  // namespace

struct NotifyBatch::Held {
  int depth = 0;
  int n = 0;
  Event ev[kMaxHeld];
};

namespace {

thread_local NotifyBatch::Held held;

void post_now(const Event& h) {
  sockaddr_un addr;
  socklen_t len = make_abstract_addr(endpoint_name(h.pid, h.id), &addr);
  (void)sendto(sender_socket(), &h.msg, sizeof(h.msg), MSG_DONTWAIT | MSG_NOSIGNAL,
               reinterpret_cast<sockaddr*>(&addr), len);
}

}  // namespace

int notify_open(uint32_t* id) {
  static std::atomic<uint32_t> next{1};
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  for (int tries = 0; tries < 64; ++tries) {
    uint32_t n = next.fetch_add(1);
    sockaddr_un addr;
    socklen_t len = make_abstract_addr(endpoint_name(getpid(), n), &addr);
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0) {
      *id = n;
      return fd;
    }
  }
  close(fd);
  return -1;
}

void notify_post(int32_t pid, uint32_t id, const NotifyMsg& msg) { post_now(Event{pid, id, msg}); }

void cq_notify(const CqRing* r) {
  if (!r->channel_id) return;
  const Event e{r->owner_pid, r->channel_id, NotifyMsg{kNotifyCq, 0, r->user_handle}};
  NotifyBatch::Held& h = held;
  if (h.depth == 0) return post_now(e);
  if (h.n == kMaxHeld) {  // a batch that completes this much wakes early: keep the order
    for (int i = 0; i < h.n; ++i) post_now(h.ev[i]);
    h.n = 0;
  }
  h.ev[h.n++] = e;
}

NotifyBatch::NotifyBatch() : held_(&held) { ++held_->depth; }

bool NotifyBatch::raised() const { return held_->n != 0; }

NotifyBatch::~NotifyBatch() {
  if (--held_->depth != 0) return;
  for (int i = 0; i < held_->n; ++i) post_now(held_->ev[i]);
  held_->n = 0;
}

}  // namespace uroce::core
