// Export helpers for the drop-in libibverbs.so.1 and librdmacm.so.1.
//
// The library is built with -fvisibility=hidden; a symbol reaches the dynamic
// symbol table only if it is marked UROCE_EXPORT *and* its name is listed in
// the library's version script (verbs/libibverbs.map, rdmacm/librdmacm.map),
// which also assigns its version node (IBVERBS_1.x, IBVERBS_PRIVATE_34,
// RDMACM_1.x). Keep the two in sync; tests/unit/verbs/exports_test.sh
// compares the result with the system library.
#pragma once

/// Default visibility alone, for use inside an `extern "C" { ... }` block
/// (needed for exported data: `extern "C" T x = v;` draws a GCC warning).
#define UROCE_VISIBLE __attribute__((visibility("default")))

/// Marks a C ABI entry point: C linkage, default visibility.
#define UROCE_EXPORT extern "C" UROCE_VISIBLE

/// Binds a definition to an explicit "name@VERSION" (hidden, non-default
/// compat twin) or "name@@VERSION" (default). Use together with UROCE_EXPORT:
/// GCC rejects a versioned symbol that is not default-visible. The C++ name of
/// the function stays local because the version script does not list it.
///
///   UROCE_EXPORT UROCE_SYMVER("ibv_foo@IBVERBS_1.0")
///   int uroce_compat_ibv_foo_1_0(void) { ... }
///
/// Needs the symver attribute (GCC >= 10, Clang >= 16). Older compilers only
/// warn about an unknown attribute and drop the twin, so fail loudly instead.
#if defined(__has_attribute)
#if __has_attribute(symver)
#define UROCE_SYMVER(name_at_version) __attribute__((symver(name_at_version)))
#endif
#endif
#ifndef UROCE_SYMVER
#define UROCE_SYMVER(name_at_version) _Pragma("GCC error \"UROCE_SYMVER needs GCC >= 10 or Clang >= 16\"")
#endif
