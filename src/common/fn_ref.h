// A non-owning reference to a callable: one pointer to it and one to a
// trampoline, nothing built or destroyed per call site (std::function costs
// a construction, a destruction through its manager and an indirect call
// each time a packet loop hands it a lambda). Valid only while the callable
// it was made from lives: for parameters, not for storing.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace uroce {

template <typename Sig>
class FnRef;

template <typename R, typename... A>
class FnRef<R(A...)> {
 public:
  template <typename C, typename = std::enable_if_t<!std::is_same_v<std::decay_t<C>, FnRef> &&
                                                    std::is_invocable_r_v<R, C&, A...>>>
  FnRef(C&& c)  // NOLINT(google-explicit-constructor): used like std::function
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(c)))), call_([](void* o, A... a) -> R {
          return (*static_cast<std::remove_reference_t<C>*>(o))(std::forward<A>(a)...);
        }) {}
  R operator()(A... a) const { return call_(obj_, std::forward<A>(a)...); }

 private:
  void* obj_;
  R (*call_)(void*, A...);
};

}  // namespace uroce
