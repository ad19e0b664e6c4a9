// Status and Result: the error model inside uroce. Codes are errno values so
// the C ABI layer converts at one boundary without a table.
#pragma once

#include <cerrno>
#include <utility>
#include <variant>

namespace uroce {

/// An errno-valued status; 0 means success.
class [[nodiscard]] Status {
 public:
  constexpr Status() = default;
  constexpr explicit Status(int err) : err_(err) {}
  static constexpr Status ok() { return Status(); }
  constexpr bool is_ok() const { return err_ == 0; }
  constexpr int err() const { return err_; }
  constexpr explicit operator bool() const { return err_ == 0; }

 private:
  int err_ = 0;
};

/// A value or an errno-valued error.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T v) : v_(std::move(v)) {}  // NOLINT: implicit by design
  Result(Status s) : v_(s) {}        // NOLINT
  bool is_ok() const { return v_.index() == 0; }
  int err() const { return is_ok() ? 0 : std::get<1>(v_).err(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T* operator->() { return &value(); }
  T& operator*() { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace uroce
