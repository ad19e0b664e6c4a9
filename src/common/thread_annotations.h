// Clang's thread-safety attributes (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html):
// which lock guards a member, which a function needs held. GCC ignores them;
// `style_thread_safety` (tests/unit/style/thread_safety_test.sh) compiles
// the annotated sources with clang's -Wthread-safety and fails on any
// warning. docs/threads.md has the lock order.
#pragma once

#if defined(__clang__)
#define UROCE_TSA(x) __attribute__((x))
#else
#define UROCE_TSA(x)
#endif

#define CAPABILITY(x) UROCE_TSA(capability(x))
#define SCOPED_CAPABILITY UROCE_TSA(scoped_lockable)
#define GUARDED_BY(x) UROCE_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) UROCE_TSA(pt_guarded_by(x))
#define REQUIRES(...) UROCE_TSA(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) UROCE_TSA(acquire_capability(__VA_ARGS__))
#define RELEASE(...) UROCE_TSA(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) UROCE_TSA(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) UROCE_TSA(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) UROCE_TSA(assert_capability(x))
#define NO_THREAD_SAFETY_ANALYSIS UROCE_TSA(no_thread_safety_analysis)

namespace uroce {

/// std::lock_guard for an annotated lock: the analysis sees it take and
/// release the lock.
template <typename Lock>
class SCOPED_CAPABILITY Guard {
 public:
  explicit Guard(Lock& l) ACQUIRE(l) : l_(l) { l_.lock(); }
  ~Guard() RELEASE() { l_.unlock(); }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

 private:
  Lock& l_;
};

}  // namespace uroce
