// Memory windows (IBA 10.6.7), the owner's side: allocation, binding and
// local invalidation write the window's entry of the context's MR table;
// peers then check R_Keys against it as against any region (transport's
// target_mr), and a SEND with Invalidate revokes a type 2 window where it
// arrives (mr_revoke_window).
#include "core/context.h"

namespace uroce::core {

namespace {

/// The remote rights a window may grant.
constexpr uint32_t kWindowRights = access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;
/// What a bind may ask: those, zero-based addressing, and local write,
/// which means nothing for a window (mlx5 accepts it too).
constexpr uint32_t kWindowAccess = kWindowRights | access::kZeroBased | access::kLocalWrite;

/// The key an entry answers to now, 0 if none (read under its seqlock: a
/// peer may be revoking it).
uint32_t bound_key(const MrEntry* e) {
  MrView v;
  for (int tries = 0; tries < 3; ++tries) {
    const uint32_t k =
        std::atomic_ref<uint32_t>(const_cast<uint32_t&>(e->key)).load(std::memory_order_relaxed);
    if (k == 0) return 0;
    if (mr_read(e, k, &v)) return k;
  }
  return 0;
}

}  // namespace

Result<uint32_t> Context::alloc_window(uint32_t pd_id, uint32_t type) {
  if (type != 1 && type != 2) return Status(EINVAL);
  auto key = take_slot_key();
  if (!key.is_ok()) return Status(key.err());
  // The slot stays empty (key 0) until a bind: nothing answers to the key yet.
  mr_write(&seg_->mr_table()[key_slot(key.value())], MrView{});
  std::lock_guard<std::mutex> g(mr_mu_);
  windows_[key_slot(key.value())] = Window{type, pd_id, 0};
  return key;
}

void Context::free_window(uint32_t key) {
  const uint32_t slot = key_slot(key);
  {
    std::lock_guard<std::mutex> g(mr_mu_);
    if (windows_.erase(slot) == 0) return;
  }
  mr_write(&seg_->mr_table()[slot], MrView{});
  give_back_slot(slot);
}

bool Context::window_bound_over(uint32_t mr_key) {
  std::lock_guard<std::mutex> g(mr_mu_);
  for (const auto& [slot, w] : windows_) {
    if (w.mr_key != mr_key) continue;
    // Bound still, unless invalidated since (by the owner or a peer).
    if (bound_key(&seg_->mr_table()[slot])) return true;
  }
  return false;
}

WcStatus Context::bind_window(const WindowBind& b, uint32_t qp_pd, uint32_t qpn) {
  const uint32_t slot = key_slot(b.key);
  std::lock_guard<std::mutex> g(mr_mu_);
  auto it = windows_.find(slot);
  // The window: this context's, in the QP's PD, and the new key in the
  // same slot (only the low "key" byte may change).
  if (it == windows_.end() || it->second.pd_id != qp_pd || key_slot(b.new_key) != slot ||
      (b.new_key >> 24) != (b.key >> 24))
    return WcStatus::kMwBindErr;
  Window& w = it->second;
  MrEntry* e = &seg_->mr_table()[slot];
  if (w.type == 2 && bound_key(e)) return WcStatus::kMwBindErr;  // invalidate it first
  if (b.len == 0 && w.type == 1) {
    mr_write(e, MrView{});  // a zero-length bind unbinds a type 1 window
    w.mr_key = 0;
    return WcStatus::kSuccess;
  }
  if ((b.access & ~kWindowAccess) || (w.type == 1 && (b.access & access::kZeroBased)))
    return WcStatus::kMwBindErr;
  MrView mr;
  if (!lookup_mr(b.mr_key, &mr) || (mr.access & access::kWindow) || mr.pd_id != w.pd_id ||
      !(mr.access & access::kMwBind) || !mr_contains(mr, b.addr, b.len))
    return WcStatus::kMwBindErr;
  if ((b.access & (access::kRemoteWrite | access::kRemoteAtomic)) && !(mr.access & access::kLocalWrite))
    return WcStatus::kMwBindErr;
  MrView v = mr;  // the region's pages, shared or not, as peers reach them
  v.key = b.new_key;
  v.access = (b.access & kWindowRights) | (w.type == 2 ? access::kWindow2 : access::kWindow1);
  v.iova = (b.access & access::kZeroBased) ? 0 : b.addr;
  v.length = b.len;
  v.vaddr = mr.vaddr + (b.addr - mr.iova);
  v.win_qpn = w.type == 2 ? qpn : 0;
  mr_write(e, v);
  w.mr_key = b.mr_key;
  return WcStatus::kSuccess;
}

WcStatus Context::local_invalidate(uint32_t key, uint32_t qp_pd) {
  const uint32_t slot = key_slot(key);
  std::lock_guard<std::mutex> g(mr_mu_);
  auto it = windows_.find(slot);
  MrEntry* e = &seg_->mr_table()[slot];
  if (it == windows_.end() || it->second.type != 2 || it->second.pd_id != qp_pd || key == 0 ||
      bound_key(e) != key)
    return WcStatus::kLocQpOpErr;
  mr_write(e, MrView{});
  it->second.mr_key = 0;
  return WcStatus::kSuccess;
}

}  // namespace uroce::core
