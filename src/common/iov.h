// Byte ranges of scatter/gather lists (struct iovec): a message's bytes at
// an offset, whichever entries hold them.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

namespace uroce {

/// Calls f(address, length) for each piece of bytes [off, off+n) of the list,
/// in order, as far as the list goes.
template <class F>
void iov_walk(std::span<const iovec> v, uint64_t off, size_t n, F&& f) {
  for (const iovec& e : v) {
    if (!n) return;
    if (off >= e.iov_len) {
      off -= e.iov_len;
      continue;
    }
    const size_t k = std::min<size_t>(n, e.iov_len - off);
    f(static_cast<uint8_t*>(e.iov_base) + off, k);
    n -= k;
    off = 0;
  }
}

/// The bytes the list describes.
inline size_t iov_bytes(std::span<const iovec> v) {
  size_t t = 0;
  for (const iovec& e : v) t += e.iov_len;
  return t;
}

/// Copies bytes [off, off+n) of the list to `out`.
inline void iov_read(std::span<const iovec> v, uint64_t off, size_t n, uint8_t* out) {
  iov_walk(v, off, n, [&](uint8_t* p, size_t k) {
    memcpy(out, p, k);
    out += k;
  });
}

/// Copies `b` into the list, from the list's byte `off` on.
inline void iov_write(std::span<const iovec> v, uint64_t off, std::span<const uint8_t> b) {
  iov_walk(v, off, b.size(), [&](uint8_t* p, size_t k) {
    memcpy(p, b.data(), k);
    b = b.subspan(k);
  });
}

/// Where bytes [off, off+n) are, if one entry holds them all; else nullptr.
inline const uint8_t* iov_contiguous(std::span<const iovec> v, uint64_t off, size_t n) {
  for (const iovec& e : v) {
    if (off >= e.iov_len) {
      off -= e.iov_len;
      continue;
    }
    return e.iov_len - off >= n ? static_cast<const uint8_t*>(e.iov_base) + off : nullptr;
  }
  return nullptr;
}

}  // namespace uroce
