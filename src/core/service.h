// The per-process service thread: off the data path. It retries deferred
// sends (RNR waits, unanswered requests) for programs that block in
// ibv_get_cq_event, and watches the control socket so a dead uroced becomes
// IBV_EVENT_DEVICE_FATAL instead of a hang.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <functional>

namespace uroce::core {

class ShmEngine;

namespace service_detail {
extern std::atomic<size_t> n_deferred;  // QPs with deferred sends (Service's state)
}

class Service {
 public:
  static Service& get();
  /// `e` has deferred sends; progress() it until it says done.
  void add_deferred(ShmEngine* e);
  /// Stops touching `e` (called before it is destroyed).
  void remove(ShmEngine* e);
  /// Starts watching the control socket; `on_death` runs once if it closes.
  void watch_daemon(int fd, std::function<void()> on_death);
  /// Retries deferred sends now (cheap when none are deferred).
  void poke();
  /// poke() if any QP has deferred sends: one load otherwise (empty polls call it).
  static void poke_if_deferred() {
    if (service_detail::n_deferred.load(std::memory_order_relaxed) != 0) get().poke();
  }
  /// Has the service thread (which lives as long as the process) lock, or
  /// unlock, a robust process-shared mutex: a context's lifetime lock (see
  /// SegHeader::owner_lock). Waits (bounded) until done; false on timeout.
  bool hold_lifetime_lock(pthread_mutex_t* m);
  bool release_lifetime_lock(pthread_mutex_t* m);

 private:
  Service() = default;
  /// Starts the thread if needed and wakes it (caller holds the state lock).
  void poke_thread_locked();
  bool lifetime_lock_request(pthread_mutex_t* m, bool lock);
  void start_locked();
  void loop();
};

}  // namespace uroce::core
