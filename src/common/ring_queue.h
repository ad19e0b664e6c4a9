// A FIFO in one growing ring of slots: no allocation per element once it
// has reached its working size (std::deque allocates and frees a node every
// few elements; with a send queue's entries that was a malloc and a free
// every second ibv_post_send). Elements are default-constructible and
// movable; a popped slot is reset to T() (releasing what it held). Growing
// moves the elements: references are stable only until the next push.
#pragma once

#include <cstddef>
#include <iterator>
#include <utility>
#include <vector>

namespace uroce {

template <typename T>
class RingQueue {
 public:
  template <typename Q, typename V>
  class Iter {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = V*;
    using reference = V&;
    Iter(Q* q, size_t i) : q_(q), i_(i) {}
    V& operator*() const { return (*q_)[i_]; }
    V* operator->() const { return &(*q_)[i_]; }
    Iter& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const Iter& o) const { return i_ == o.i_; }
    bool operator!=(const Iter& o) const { return i_ != o.i_; }

   private:
    Q* q_;
    size_t i_;
  };
  using iterator = Iter<RingQueue, T>;
  using const_iterator = Iter<const RingQueue, const T>;

  /// A new element at the back, default-constructed (a reset slot).
  T& emplace_back() {
    if (n_ == slots_.size()) grow();
    T& t = slots_[(head_ + n_) & (slots_.size() - 1)];
    ++n_;
    return t;
  }
  void pop_front() {
    slots_[head_] = T();
    head_ = (head_ + 1) & (slots_.size() - 1);
    --n_;
  }
  T& front() { return slots_[head_]; }
  const T& front() const { return slots_[head_]; }
  /// The i-th element from the front.
  T& operator[](size_t i) { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  const T& operator[](size_t i) const { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  bool empty() const { return n_ == 0; }
  size_t size() const { return n_; }
  iterator begin() { return iterator(this, 0); }
  iterator end() { return iterator(this, n_); }
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, n_); }

 private:
  void grow() {
    std::vector<T> s(slots_.empty() ? 8 : 2 * slots_.size());  // a power of two
    for (size_t i = 0; i < n_; ++i) s[i] = std::move((*this)[i]);
    slots_.swap(s);
    head_ = 0;
  }

  std::vector<T> slots_;
  size_t head_ = 0, n_ = 0;
};

}  // namespace uroce
