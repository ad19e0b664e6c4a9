// Device memory (ibv_alloc_dm): memory that belongs to the NIC rather than to
// the program. uroce's NIC is software, so its memory is a page-aligned
// anonymous mapping the library owns; the program reaches it only through
// copy_to/copy_from (ibv_memcpy_to/from_dm) and through zero-based memory
// regions registered on it (ibv_reg_dm_mr), which every link then accesses
// like any other region. The rules are mlx5's, as rdma-core's test suite
// checks them: offsets and lengths 4-byte aligned (EINVAL), inside the
// allocation (EFAULT), at most kLimits.max_dm_size per request (EINVAL) and
// in total per context (ENOMEM).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "common/status.h"

namespace uroce::core {

class DeviceMemory {
 public:
  /// Copies are 4-byte aligned, as mlx5's device memory requires.
  static constexpr uint64_t kAlignBytes = 4;

  /// `len` bytes aligned to 2^log_align (at most a page), charged to
  /// `budget` (bytes left of the context's device memory).
  static Result<std::unique_ptr<DeviceMemory>> alloc(uint64_t len, uint32_t log_align,
                                                     std::atomic<uint64_t>* budget);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  Status copy_to(uint64_t off, const void* src, uint64_t len);
  Status copy_from(void* dst, uint64_t off, uint64_t len) const;
  /// Where the memory lives in this process (what its regions map).
  uint64_t addr() const { return reinterpret_cast<uint64_t>(base_); }
  uint64_t length() const { return len_; }

  std::atomic<int> refs{0};  ///< memory regions on it (free -> EBUSY)

 private:
  DeviceMemory() = default;
  Status check(uint64_t off, uint64_t len) const;

  void* base_ = nullptr;
  uint64_t len_ = 0;
  uint64_t mapped_ = 0;
  std::atomic<uint64_t>* budget_ = nullptr;
};

}  // namespace uroce::core
