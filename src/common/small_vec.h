// A vector of trivially copyable elements that keeps up to N of them in
// place and goes to the heap only beyond: a work request's gather list and
// inline bytes cost no allocation in the common case (one or two entries,
// a few bytes), on the path every ibv_post_send takes.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

namespace uroce {

template <typename T, size_t N>
class SmallVec {
  static_assert(std::is_trivially_copyable_v<T>, "elements are moved with memcpy");

 public:
  SmallVec() = default;
  SmallVec(const SmallVec& o) { assign(o.begin(), o.end()); }
  SmallVec(SmallVec&& o) noexcept { take(o); }
  SmallVec& operator=(const SmallVec& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVec& operator=(SmallVec&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  ~SmallVec() { release(); }

  /// Size n; new elements are left as they were (not zeroed).
  void resize(size_t n) {
    reserve(n);
    n_ = n;
  }
  void assign(const T* first, const T* last) {
    const size_t n = size_t(last - first);
    n_ = 0;
    reserve(n);
    if (n) memcpy(static_cast<void*>(data()), first, n * sizeof(T));
    n_ = n;
  }
  void push_back(const T& v) {
    reserve(n_ + 1);
    data()[n_++] = v;
  }

  T* data() { return heap_ ? heap_ : reinterpret_cast<T*>(in_); }
  const T* data() const { return heap_ ? heap_ : reinterpret_cast<const T*>(in_); }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T* begin() { return data(); }
  T* end() { return data() + n_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + n_; }

 private:
  void reserve(size_t n) {
    if (n <= cap_) return;
    size_t cap = cap_ * 2 > n ? cap_ * 2 : n;
    T* h = static_cast<T*>(malloc(cap * sizeof(T)));
    if (!h) throw std::bad_alloc();
    if (n_) memcpy(static_cast<void*>(h), data(), n_ * sizeof(T));
    free(heap_);
    heap_ = h;
    cap_ = cap;
  }
  void release() {
    free(heap_);
    heap_ = nullptr;
    cap_ = N;
    n_ = 0;
  }
  void take(SmallVec& o) {
    n_ = o.n_;
    if (o.heap_) {
      heap_ = o.heap_;
      cap_ = o.cap_;
      o.heap_ = nullptr;
      o.cap_ = N;
    } else if (n_) {
      memcpy(in_, o.in_, n_ * sizeof(T));
    }
    o.n_ = 0;
  }

  alignas(T) unsigned char in_[N * sizeof(T)];
  T* heap_ = nullptr;
  size_t n_ = 0;
  size_t cap_ = N;
};

}  // namespace uroce
