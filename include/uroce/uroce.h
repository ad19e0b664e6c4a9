/* uroce: a user-space software RDMA NIC behind a drop-in libibverbs.so.1.
 *
 * Programs use uroce through the standard verbs API (<infiniband/verbs.h> from
 * rdma-core); they need nothing from this header. It exists for programs and
 * scripts that want to know which uroce they run with, and to spell the
 * environment variables uroce reads without typos.
 *
 * Plain C (C89 and later) and C++: macros only, no declarations, no linking.
 */
#ifndef UROCE_UROCE_H_
#define UROCE_UROCE_H_

/* Version of the uroce release this header belongs to (the CMake project
 * version; the pkg-config file "uroce.pc" carries the same string). */
#define UROCE_VERSION_MAJOR 0
#define UROCE_VERSION_MINOR 1
#define UROCE_VERSION_PATCH 0
#define UROCE_VERSION_STRING "0.1.0"
/* One comparable number, for #if: UROCE_VERSION >= UROCE_VERSION_ENCODE(0, 1, 0). */
#define UROCE_VERSION_ENCODE(major, minor, patch) (((major)*10000L) + ((minor)*100L) + (patch))
#define UROCE_VERSION UROCE_VERSION_ENCODE(UROCE_VERSION_MAJOR, UROCE_VERSION_MINOR, UROCE_VERSION_PATCH)

/* Environment variables, by name. What each one does and its default are
 * in one place: the table "Environment variables" of uroce's README.md,
 * which the man page uroce(7) reproduces; style_env_table_test checks that
 * these macros name exactly the UROCE_* variables the code reads. The macros
 * are called UROCE_ENV_<what> rather than the variable's own name so they
 * never clash with a project's own macros (e.g. a logging macro called
 * UROCE_LOG). */
#define UROCE_ENV_LOG "UROCE_LOG"
#define UROCE_ENV_NETDEVS "UROCE_NETDEVS"
#define UROCE_ENV_DAEMON_NAME "UROCE_DAEMON_NAME"
#define UROCE_ENV_UROCED "UROCE_UROCED"
#define UROCE_ENV_UROCED_IDLE_MS "UROCED_IDLE_MS"
#define UROCE_ENV_UROCED_TRUST_GID "UROCED_TRUST_GID"
#define UROCE_ENV_MR_SHARE "UROCE_MR_SHARE"
#define UROCE_ENV_MR_SHARE_MAX "UROCE_MR_SHARE_MAX"
#define UROCE_ENV_CQ_FENCE "UROCE_CQ_FENCE"
#define UROCE_ENV_EAGER "UROCE_EAGER"
#define UROCE_ENV_LINK "UROCE_LINK"
#define UROCE_ENV_LINK_XDP "UROCE_LINK_XDP"
#define UROCE_ENV_CC "UROCE_CC"
#define UROCE_ENV_CC_TARGET_US "UROCE_CC_TARGET_US"
#define UROCE_ENV_SR "UROCE_SR"
#define UROCE_ENV_REORDER_US "UROCE_REORDER_US"
#define UROCE_ENV_CM_RESPONSE_TIMEOUT "UROCE_CM_RESPONSE_TIMEOUT"
#define UROCE_ENV_CM_RETRIES "UROCE_CM_RETRIES"
#define UROCE_ENV_FAULTS "UROCE_FAULTS"
#define UROCE_ENV_TRACE "UROCE_TRACE"
#define UROCE_ENV_CAPTURE "UROCE_CAPTURE"

#endif /* UROCE_UROCE_H_ */
