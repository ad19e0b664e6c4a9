#include "core/service.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/fork_gate.h"
#include "core/shm_engine.h"
#include "memory/peer_pages.h"

namespace uroce::core {

namespace service_detail {
std::atomic<size_t> n_deferred{0};
}

namespace {

struct State {
  std::mutex mu;      // guards the fields below
  std::mutex run_mu;  // held while progressing engines (remove waits on it)
  // Held by the service thread whenever it is not asleep; fork() takes it
  // (see common/fork_gate.h).
  std::mutex fork_mu;
  ForkGate fork_gate;
  std::vector<ShmEngine*> deferred;
  std::atomic<size_t>& n_deferred = service_detail::n_deferred;
  int wake_fd = -1;
  int daemon_fd = -1;
  std::function<void()> on_death;
  bool started = false;
  // Lifetime-lock requests for the service thread: (mutex, lock?) -> done.
  struct LockReq {
    pthread_mutex_t* m;
    bool lock;
    bool done = false;
  };
  std::vector<LockReq*> lock_reqs;
  std::condition_variable lock_cv;
};

State& st() {
  static State* s = [] {
    auto* n = new State();  // lives for the process
    // The service thread does not survive fork(): the child starts its own on demand.
    pthread_atfork([] { st().fork_gate.prepare(st().fork_mu); }, [] { st().fork_mu.unlock(); },
                   [] {
                     State& c = st();
                     new (&c.fork_mu) std::mutex();
                     c.fork_gate.child();
                     new (&c.mu) std::mutex();
                     new (&c.run_mu) std::mutex();
                     c.deferred.clear();
                     c.n_deferred.store(0);
                     if (c.wake_fd >= 0) close(c.wake_fd);
                     c.wake_fd = -1;
                     c.daemon_fd = -1;
                     c.on_death = nullptr;
                     c.started = false;
                     c.lock_reqs.clear();
                     new (&c.lock_cv) std::condition_variable();
                   });
    return n;
  }();
  return *s;
}

constexpr int kIdlePollMs = 100;
constexpr long kBusyNapNs = 20000;  // retry cadence while work is deferred
constexpr uint64_t kSweepNs = 1'000'000'000ull;

}  // namespace

Service& Service::get() {
  static Service s;
  return s;
}

void Service::start_locked() {
  State& s = st();
  if (s.started) return;
  s.started = true;
  s.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  s.fork_gate.starting();
  std::thread([this] { loop(); }).detach();
}

void Service::add_deferred(ShmEngine* qp) {
  State& s = st();
  {
    std::lock_guard<std::mutex> g(s.mu);
    if (std::find(s.deferred.begin(), s.deferred.end(), qp) == s.deferred.end()) {
      s.deferred.push_back(qp);
      s.n_deferred.store(s.deferred.size());
    }
    start_locked();
  }
  uint64_t one = 1;
  ssize_t w = write(s.wake_fd, &one, sizeof(one));
  (void)w;
}

void Service::remove(ShmEngine* qp) {
  State& s = st();
  std::lock_guard<std::mutex> r(s.run_mu);
  std::lock_guard<std::mutex> g(s.mu);
  s.deferred.erase(std::remove(s.deferred.begin(), s.deferred.end(), qp), s.deferred.end());
  s.n_deferred.store(s.deferred.size());
}

void Service::watch_daemon(int fd, std::function<void()> on_death) {
  State& s = st();
  std::lock_guard<std::mutex> g(s.mu);
  if (s.daemon_fd >= 0) return;
  s.daemon_fd = fd;
  s.on_death = std::move(on_death);
  start_locked();
}

bool Service::lifetime_lock_request(pthread_mutex_t* m, bool lock) {
  State& s = st();
  State::LockReq req{m, lock};
  std::unique_lock<std::mutex> g(s.mu);
  s.lock_reqs.push_back(&req);
  poke_thread_locked();
  bool ok = s.lock_cv.wait_for(g, std::chrono::seconds(5), [&] { return req.done; });
  if (!ok) std::erase(s.lock_reqs, &req);
  return ok;
}

void Service::poke_thread_locked() {
  start_locked();
  uint64_t one = 1;
  ssize_t w = write(st().wake_fd, &one, sizeof(one));
  (void)w;
}

bool Service::hold_lifetime_lock(pthread_mutex_t* m) { return lifetime_lock_request(m, true); }
bool Service::release_lifetime_lock(pthread_mutex_t* m) { return lifetime_lock_request(m, false); }

void Service::poke() {
  State& s = st();
  if (s.n_deferred.load(std::memory_order_relaxed) == 0) return;
  std::unique_lock<std::mutex> r(s.run_mu, std::try_to_lock);
  if (!r.owns_lock()) return;  // the service thread is at it
  std::vector<ShmEngine*> qps;
  {
    std::lock_guard<std::mutex> g(s.mu);
    qps = s.deferred;
  }
  std::vector<ShmEngine*> done;
  for (ShmEngine* q : qps)
    if (!q->progress()) done.push_back(q);
  std::lock_guard<std::mutex> g(s.mu);
  // A QP that deferred new work after its progress() said "done" keeps its
  // place: its flag is set before add_deferred, which also takes s.mu.
  for (ShmEngine* q : done) {
    if (q->wants_service()) continue;
    s.deferred.erase(std::remove(s.deferred.begin(), s.deferred.end(), q), s.deferred.end());
  }
  s.n_deferred.store(s.deferred.size());
}

void Service::loop() {
  State& s = st();
  uint64_t last_sweep = now_ns();
  std::unique_lock<std::mutex> gate(s.fork_mu);
  s.fork_gate.running();
  for (;;) {
    if (!gate.owns_lock()) gate.lock();
    int dfd;
    {
      std::lock_guard<std::mutex> g(s.mu);
      dfd = s.daemon_fd;
    }
    bool busy = s.n_deferred.load() != 0;
    pollfd p[2] = {{s.wake_fd, POLLIN, 0}, {dfd, POLLRDHUP, 0}};
    gate.unlock();
    int r = poll(p, dfd >= 0 ? 2 : 1, busy ? 0 : kIdlePollMs);
    gate.lock();
    if (r > 0 && (p[0].revents & POLLIN)) {
      uint64_t v;
      ssize_t n = read(s.wake_fd, &v, sizeof(v));
      (void)n;
    }
    {
      // Lifetime locks are taken and released by this thread only, which never exits.
      std::lock_guard<std::mutex> g(s.mu);
      for (State::LockReq* q : s.lock_reqs) {
        if (q->lock)
          pthread_mutex_lock(q->m);
        else
          pthread_mutex_unlock(q->m);
        q->done = true;
      }
      if (!s.lock_reqs.empty()) {
        s.lock_reqs.clear();
        s.lock_cv.notify_all();
      }
    }
    if (r > 0 && dfd >= 0 && (p[1].revents & (POLLHUP | POLLRDHUP | POLLERR))) {
      std::function<void()> cb;
      {
        std::lock_guard<std::mutex> g(s.mu);
        cb = std::move(s.on_death);
        s.on_death = nullptr;
        s.daemon_fd = -1;
      }
      if (cb) cb();
    }
    if (uint64_t now = now_ns(); now - last_sweep >= kSweepNs) {
      peer_pages_sweep();  // unpins peers' memory that no live region uses
      last_sweep = now;
    }
    if (busy) {
      poke();
      gate.unlock();
      timespec ts{0, kBusyNapNs};
      nanosleep(&ts, nullptr);
    }
  }
}

}  // namespace uroce::core
