// Event channels and events (rdma/rdma_cma.h): create/destroy a channel,
// get and acknowledge events, name them. See cm.h for how a channel works.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <new>

#include "common/export.h"
#include "rdmacm/cm.h"

namespace uroce::rdmacm {
namespace {

Channel* new_channel() {
  int fd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
  if (fd < 0) return nullptr;
  auto* c = new (std::nothrow) Channel();
  if (!c) {
    close(fd);
    errno = ENOMEM;
    return nullptr;
  }
  c->pub.fd = fd;
  return c;
}

/// Takes the next event off `c`, waiting for one unless the program made
/// the fd non-blocking. Every event posted added one to the eventfd; an
/// event removed without being read (its id was destroyed or moved to
/// another channel) leaves a one behind, so an empty queue after a read
/// means "read again". A channel destroyed while a thread waits here stays
/// (its eventfd open) until that thread leaves: the thread waits on, as a
/// read of the kernel's rdma_cm file does once the program closed it under
/// the reader (rping's CM thread sits there while main destroys the
/// channel; a removed event's one must not send it to a closed fd).
Event* take_event(Channel* c) {
  {
    std::lock_guard<std::mutex> g(c->mu);
    ++c->readers;
  }
  Event* got = nullptr;
  int err = 0;
  for (;;) {
    uint64_t one = 0;
    const ssize_t r = read(c->pub.fd, &one, sizeof(one));
    if (r != ssize_t(sizeof(one))) {
      err = errno;
      break;
    }
    std::lock_guard<std::mutex> g(c->mu);
    if (!c->queue.empty()) {
      got = c->queue.front();
      c->queue.pop_front();
      break;
    }
    if (c->destroyed) continue;
    const int fl = fcntl(c->pub.fd, F_GETFL);
    if (fl >= 0 && (fl & O_NONBLOCK)) {
      err = EAGAIN;
      break;
    }
  }
  bool last;
  {
    std::lock_guard<std::mutex> g(c->mu);
    last = --c->readers == 0 && c->destroyed;
  }
  if (last) {
    close(c->pub.fd);
    delete c;
  }
  if (!got) errno = err;
  return got;
}

}  // namespace

void queue_event(rdma_event_channel* ch, Event* e) {
  Channel* c = from(ch);
  {
    std::lock_guard<std::mutex> g(c->mu);
    c->queue.push_back(e);
  }
  const uint64_t one = 1;
  // Cannot fail short of a counter at 2^64-2.
  (void)!write(c->pub.fd, &one, sizeof(one));
}

void post_event(CmId* id, rdma_cm_event_type type, int status) {
  auto* e = new Event();
  e->pub.id = &id->pub;
  e->pub.event = type;
  e->pub.status = status;
  queue_event(id->pub.channel, e);
}

/// Counts an event as handed to the program (rdma_destroy_id and
/// rdma_migrate_id wait until as many were acknowledged).
static void reported(Event* e) {
  CmId* id = from(e->pub.id);
  std::lock_guard<std::mutex> g(id->mu);
  ++id->events_reported;
}

int sync_wait(CmId* id) {
  if (id->pub.event) {
    rdma_ack_cm_event(id->pub.event);
    id->pub.event = nullptr;
  }
  Event* e = take_event(from(id->pub.channel));
  if (!e) return -1;
  reported(e);
  id->pub.event = &e->pub;
  if (e->pub.status != 0) {
    // Negative errno, or a positive REJ reason: the kernel's library reports ECONNREFUSED then.
    errno = e->pub.status < 0 ? -e->pub.status : ECONNREFUSED;
    return -1;
  }
  return 0;
}

}  // namespace uroce::rdmacm

using namespace uroce::rdmacm;

UROCE_EXPORT rdma_event_channel* rdma_create_event_channel(void) {
  Channel* c = new_channel();
  return c ? &c->pub : nullptr;
}

UROCE_EXPORT void rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (!channel) return;
  Channel* c = from(channel);
  bool now;
  {
    std::lock_guard<std::mutex> g(c->mu);
    for (Event* e : c->queue) delete e;
    c->queue.clear();
    c->destroyed = true;
    now = c->readers == 0;
  }
  if (!now) return;  // a reader inside rdma_get_cm_event frees it (take_event)
  close(c->pub.fd);
  delete c;
}

UROCE_EXPORT int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (!channel || !event) {
    errno = EINVAL;
    return -1;
  }
  Event* e = take_event(from(channel));
  if (!e) return -1;
  reported(e);
  *event = &e->pub;
  return 0;
}

UROCE_EXPORT int rdma_ack_cm_event(rdma_cm_event* event) {
  if (!event) {
    errno = EINVAL;
    return -1;
  }
  Event* e = from(event);
  CmId* id = from(e->pub.id);
  {
    std::lock_guard<std::mutex> g(id->mu);
    ++id->events_acked;
  }
  id->acked.notify_all();
  delete e;
  return 0;
}

UROCE_EXPORT const char* rdma_event_str(rdma_cm_event_type event) {
  switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR:
      return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR:
      return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST:
      return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
      return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR:
      return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE:
      return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED:
      return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED:
      return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED:
      return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN:
      return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR:
      return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE:
      return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
  }
  return "UNKNOWN EVENT";
}
