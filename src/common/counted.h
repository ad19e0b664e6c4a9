// A block of counters (a struct of uint64_t) kept by one object and written
// by one thread at a time, which can be pointed at memory others read — a
// QP's counters go to its owner's shared segment, where uroced and
// `uroce stat` read them (contract/counters.h) — at no cost beyond a pointer.
#pragma once

namespace uroce {

template <class S>
class Counted {
 public:
  Counted() = default;
  /// A copy starts from the counts so far, and counts on its own.
  Counted(const Counted& o) : own_(*o.p_) {}
  Counted& operator=(const Counted& o) {
    own_ = *o.p_;
    p_ = &own_;
    return *this;
  }

  S* operator->() { return p_; }
  S& operator*() { return *p_; }
  const S& get() const { return *p_; }
  /// From now on counts go to `s` (which keeps what it holds: several
  /// objects may count into one block, if one thread at a time writes).
  void use(S* s) { p_ = s; }

 private:
  S own_{};
  S* p_ = &own_;
};

}  // namespace uroce
