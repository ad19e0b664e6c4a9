#include "core/context.h"

#include <sys/prctl.h>
#include <unistd.h>

#include "core/notify.h"

namespace uroce::core {

Result<std::unique_ptr<Context>> Context::open(const DeviceInfo& dev) {
  auto cc = ControlClient::get();
  if (!cc.is_ok()) return Status(cc.err());
  std::unique_ptr<Context> c(new Context());
  c->dev_ = dev;
  c->ctl_ = cc.value();
  auto seg = Segment::create();
  if (!seg.is_ok()) return Status(seg.err());
  c->seg_ = std::move(seg.value());
  auto id = c->ctl_->register_ctx(c->seg_->memfd());
  if (!id.is_ok()) return Status(id.err());
  c->ctx_id_ = id.value();
  // Peers copy into this process with process_vm_writev, which Yama's
  // ptrace_scope=1 would refuse between non-descendants; allow it (same-uid
  // checks still apply). Without Yama this fails harmlessly with EINVAL.
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  c->async_fd_ = notify_open(&c->async_id_);
  if (c->async_fd_ < 0) return Status(errno ? errno : EMFILE);
  return c;
}

Context::~Context() {
  if (ctx_id_) ctl_->unregister_ctx(ctx_id_);
  if (async_fd_ >= 0) close(async_fd_);
}

Result<uint32_t> Context::reg_mr(uint32_t pd_id, uint64_t vaddr, uint64_t len, uint64_t iova,
                                 uint32_t access) {
  uint32_t slot;
  {
    std::lock_guard<std::mutex> g(mr_mu_);
    if (!free_slots_.empty()) {
      slot = free_slots_.front();
      free_slots_.erase(free_slots_.begin());
    } else if (next_slot_ < kMaxMrPerContext) {
      slot = next_slot_++;
    } else {
      return Status(ENOMEM);
    }
  }
  auto key = ctl_->alloc_key(ctx_id_, slot);
  if (!key.is_ok()) {
    std::lock_guard<std::mutex> g(mr_mu_);
    free_slots_.push_back(slot);
    return Status(key.err());
  }
  MrView v{key.value(), pd_id, access, iova, len, vaddr};
  mr_write(&seg_->mr_table()[slot], v);
  return key.value();
}

Status Context::rereg_mr(uint32_t key, uint32_t pd_id, uint64_t vaddr, uint64_t len, uint64_t iova,
                         uint32_t access) {
  MrView old;
  if (!lookup_mr(key, &old)) return Status(EINVAL);
  MrView v{key, pd_id, access, iova, len, vaddr};
  mr_write(&seg_->mr_table()[key_slot(key)], v);
  return Status::ok();
}

void Context::dereg_mr(uint32_t key) {
  uint32_t slot = key_slot(key);
  MrView v{};
  mr_write(&seg_->mr_table()[slot], v);
  std::lock_guard<std::mutex> g(mr_mu_);
  free_slots_.push_back(slot);
}

}  // namespace uroce::core
