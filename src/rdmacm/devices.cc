// The devices the CM works on: one shared context per device, opened at the
// first call that needs them and kept for the life of the process (as the
// kernel's librdmacm does), and one shared PD per context for ids whose QP is
// created without a PD. rdma_get_devices hands out these contexts, so
// id->verbs is always one of them.
#include <pthread.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "common/export.h"
#include "rdmacm/cm.h"

namespace uroce::rdmacm {
namespace {

struct Devices {
  std::mutex mu;
  bool opened = false;
  std::vector<ibv_context*> ctxs;  // NULL-terminated once opened
  std::vector<ibv_pd*> pds;        // same index; nullptr until first use
};

Devices* g_devices = nullptr;

/// A fork() child opens its own contexts: the parent's are not its to use
/// (as a kernel device's are not shared with a child either).
void forget_in_child() { g_devices = new Devices(); }

Devices& devices() {
  static bool once = [] {
    g_devices = new Devices();  // lives for the process, as the contexts do
    pthread_atfork(nullptr, nullptr, forget_in_child);
    return true;
  }();
  (void)once;
  return *g_devices;
}

}  // namespace

ibv_context** device_contexts(int* num) {
  Devices& d = devices();
  std::lock_guard<std::mutex> g(d.mu);
  if (!d.opened) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list) return nullptr;
    for (int i = 0; i < n; ++i)
      if (ibv_context* c = ibv_open_device(list[i])) d.ctxs.push_back(c);
    ibv_free_device_list(list);
    d.pds.assign(d.ctxs.size(), nullptr);
    d.ctxs.push_back(nullptr);
    d.opened = true;
  }
  if (num) *num = int(d.ctxs.size()) - 1;
  if (d.ctxs.size() == 1) {
    errno = ENODEV;
    return nullptr;
  }
  return d.ctxs.data();
}

ibv_pd* shared_pd(ibv_context* ctx) {
  Devices& d = devices();
  std::lock_guard<std::mutex> g(d.mu);
  for (size_t i = 0; i + 1 < d.ctxs.size(); ++i) {
    if (d.ctxs[i] != ctx) continue;
    if (!d.pds[i]) d.pds[i] = ibv_alloc_pd(ctx);
    return d.pds[i];
  }
  errno = EINVAL;
  return nullptr;
}

}  // namespace uroce::rdmacm

using namespace uroce::rdmacm;

UROCE_EXPORT ibv_context** rdma_get_devices(int* num_devices) {
  int n = 0;
  if (num_devices) *num_devices = 0;
  ibv_context** all = device_contexts(&n);
  if (!all) return nullptr;
  auto** out = static_cast<ibv_context**>(calloc(size_t(n) + 1, sizeof(ibv_context*)));
  if (!out) {
    errno = ENOMEM;
    return nullptr;
  }
  for (int i = 0; i < n; ++i) out[i] = all[i];
  if (num_devices) *num_devices = n;
  return out;
}

UROCE_EXPORT void rdma_free_devices(ibv_context** list) { free(list); }
