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

void notify_post(int32_t pid, uint32_t id, const NotifyMsg& msg) {
  sockaddr_un addr;
  socklen_t len = make_abstract_addr(endpoint_name(pid, id), &addr);
  (void)sendto(sender_socket(), &msg, sizeof(msg), MSG_DONTWAIT | MSG_NOSIGNAL,
               reinterpret_cast<sockaddr*>(&addr), len);
}

void cq_notify(const CqRing* r) {
  if (!r->channel_id) return;
  NotifyMsg m{kNotifyCq, 0, r->user_handle};
  notify_post(r->owner_pid, r->channel_id, m);
}

}  // namespace uroce::core
