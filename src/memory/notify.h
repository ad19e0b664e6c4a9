// Cross-process wake-ups. A completion channel or a context's async-event
// queue is an AF_UNIX datagram socket bound to an abstract name derived from
// (owner pid, id); any process on the host can post to it without holding a
// descriptor, and the owner's fd is a real pollable fd (epoll, O_NONBLOCK).
#pragma once

#include <cstdint>

namespace uroce::core {

struct CqRing;

/// What travels in one datagram.
struct NotifyMsg {
  uint32_t kind;    // kNotifyCq or kNotifyAsync
  uint32_t event;   // AsyncEvent for kNotifyAsync
  uint64_t handle;  // owner-local object handle (ibv_cq* / ibv_qp* / ibv_srq*)
};
constexpr uint32_t kNotifyCq = 1;
constexpr uint32_t kNotifyAsync = 2;

/// Creates and binds a receive socket for a new endpoint; returns the fd and
/// sets *id. Blocking unless the app sets O_NONBLOCK, as the kernel's fds.
int notify_open(uint32_t* id);
/// Posts to endpoint (pid, id). Never blocks; a full queue drops the message
/// (the endpoint is then readable anyway).
void notify_post(int32_t pid, uint32_t id, const NotifyMsg& msg);
/// Wakes the completion channel of a CQ whose ring said kOkNotify (cq_push);
/// inside a NotifyBatch on this thread, when the batch ends.
void cq_notify(const CqRing* r);

/// While one lives on a thread, the completion events that thread raises are
/// held and posted, in order, when the outermost one ends. The network engine
/// opens one around each round of packets it handles: a round often carries
/// a reply and the ACK for the request it answers, and an application that
/// waits on one completion channel for both CQs and polls only the CQ it
/// expects (perftest's latency loops with -e) must find both completions when
/// it wakes, as it would behind a NIC that acknowledged the request long
/// before the reply came.
class NotifyBatch {
 public:
  NotifyBatch();
  ~NotifyBatch();
  /// Whether events are held (this thread's application will wake).
  bool raised() const;
  NotifyBatch(const NotifyBatch&) = delete;
  NotifyBatch& operator=(const NotifyBatch&) = delete;
  /// The events a thread holds (notify.cc).
  struct Held;

 private:
  Held* held_;  // this thread's (one thread-local lookup per batch)
};

}  // namespace uroce::core
