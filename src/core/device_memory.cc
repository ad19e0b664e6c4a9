#include "core/device_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "contract/limits.h"

namespace uroce::core {

Result<std::unique_ptr<DeviceMemory>> DeviceMemory::alloc(uint64_t len, uint32_t log_align,
                                                          std::atomic<uint64_t>* budget) {
  const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  if (len == 0 || len > kLimits.max_dm_size || log_align >= 64 || (uint64_t(1) << log_align) > page)
    return Status(EINVAL);
  // Take the bytes from the context's budget first, as a NIC's memory runs out.
  uint64_t left = budget->load(std::memory_order_relaxed);
  do {
    if (left < len) return Status(ENOMEM);
  } while (!budget->compare_exchange_weak(left, left - len, std::memory_order_relaxed));
  std::unique_ptr<DeviceMemory> d(new DeviceMemory());
  d->budget_ = budget;
  d->len_ = len;
  d->mapped_ = (len + page - 1) / page * page;
  void* p = mmap(nullptr, d->mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return Status(ENOMEM);  // the destructor returns the budget
  d->base_ = p;
  return d;
}

DeviceMemory::~DeviceMemory() {
  if (base_) munmap(base_, mapped_);
  if (budget_) budget_->fetch_add(len_, std::memory_order_relaxed);
}

Status DeviceMemory::check(uint64_t off, uint64_t len) const {
  if (off > len_ || len > len_ - off) return Status(EFAULT);
  if (off % kAlignBytes || len % kAlignBytes) return Status(EINVAL);
  return Status::ok();
}

Status DeviceMemory::copy_to(uint64_t off, const void* src, uint64_t len) {
  if (Status s = check(off, len); !s.is_ok()) return s;
  memcpy(static_cast<uint8_t*>(base_) + off, src, len);
  return Status::ok();
}

Status DeviceMemory::copy_from(void* dst, uint64_t off, uint64_t len) const {
  if (Status s = check(off, len); !s.is_ok()) return s;
  memcpy(dst, static_cast<const uint8_t*>(base_) + off, len);
  return Status::ok();
}

}  // namespace uroce::core
