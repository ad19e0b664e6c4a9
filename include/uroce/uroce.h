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

/* Environment variables, by name. The macros are called UROCE_ENV_<what>
 * rather than the variable's own name so they never clash with a project's
 * own macros (e.g. a logging macro called UROCE_LOG). */

/* Log threshold of the library and of uroced, written to stderr as
 * "uroce[pid]: ...": error (default), warn, info, debug, trace, or 0-4. */
#define UROCE_ENV_LOG "UROCE_LOG"

/* Comma-separated interface names that get a device (uroce_<ifname>), e.g.
 * "lo,eth0". Unset: every interface that is up and has an IPv4 address.
 * Read by uroced when it starts, so it must be set in the environment of the
 * first process that uses uroce (the library starts uroced from there). */
#define UROCE_ENV_NETDEVS "UROCE_NETDEVS"

/* Name of the uroced instance to talk to (an abstract unix socket
 * "uroce/<name>"). Unset: one daemon per user, "uroce/uroced-uid<uid>".
 * Processes that should see each other's devices and queue pairs must use the
 * same name; tests use a private one each so they never share a daemon. */
#define UROCE_ENV_DAEMON_NAME "UROCE_DAEMON_NAME"

/* Path of the uroced executable the library starts when no daemon answers.
 * Unset: next to the library (build tree: ../bin/uroced; installed:
 * <prefix>/libexec/uroce/uroced, found from <prefix>/lib/uroce). */
#define UROCE_ENV_UROCED "UROCE_UROCED"

/* Milliseconds uroced stays alive with no client before it exits by itself
 * (default 3000). Read by uroced; inherited from the process that starts it. */
#define UROCE_ENV_UROCED_IDLE_MS "UROCED_IDLE_MS"

/* A numeric group id whose members uroced also serves; unset: only processes
 * of its own user (SO_PEERCRED). Read by uroced. */
#define UROCE_ENV_UROCED_TRUST_GID "UROCED_TRUST_GID"

/* Which link a connected QP with a global route uses: "auto" (default; RoCE
 * v2 over UDP to another host or another user's process, shared memory
 * otherwise), "udp" (always UDP) or "shm" (never UDP). */
#define UROCE_ENV_LINK "UROCE_LINK"

/* Unset or "1" (the default): RC and UC QPs use AF_XDP (docs/afxdp-link.md)
 * on a device whose interface uroced can lend this process (uroced with
 * CAP_NET_RAW, CAP_NET_ADMIN and CAP_BPF), UDP sockets otherwise. "0": UDP
 * sockets. "require": an RC or UC QP that cannot use AF_XDP fails to reach
 * RTR (EOPNOTSUPP): for tests of that link. */
#define UROCE_ENV_LINK_XDP "UROCE_LINK_XDP"

/* "0": never re-back registered pages with a memfd (every intra-host copy is
 * a process_vm_* system call). */
#define UROCE_ENV_MR_SHARE "UROCE_MR_SHARE"

/* Largest region, in bytes, whose pages are re-backed at ibv_reg_mr
 * (default 1 GiB). */
#define UROCE_ENV_MR_SHARE_MAX "UROCE_MR_SHARE_MAX"

/* "1": act as if membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) were unavailable:
 * every completion producer fences after publishing. */
#define UROCE_ENV_CQ_FENCE "UROCE_CQ_FENCE"

/* "0": a small SEND between processes of one host takes the usual delivery
 * instead of one record in the receiver's ring. */
#define UROCE_ENV_EAGER "UROCE_EAGER"

/* The CM's response timeout on the wire, as the IBTA's 5-bit exponent
 * (4.096 us * 2^value; default 20). Read by uroced at start. */
#define UROCE_ENV_CM_RESPONSE_TIMEOUT "UROCE_CM_RESPONSE_TIMEOUT"

/* How often (0-15, default 15) a CM message is sent again before the
 * connection is given up. Read by uroced at start. */
#define UROCE_ENV_CM_RETRIES "UROCE_CM_RETRIES"

/* Fault injection on every packet the network link sends:
 * "drop=P,dup=P,reorder=P,corrupt=P,seed=N" (probabilities 0-1). */
#define UROCE_ENV_FAULTS "UROCE_FAULTS"

/* A pcap file ("%p": the process id) that gets every RoCE v2 packet the
 * network link sends and every one it receives with a good ICRC. */
#define UROCE_ENV_CAPTURE "UROCE_CAPTURE"

/* A text file ("%p": the process id) that gets one line per event of each
 * QP: work requests posted, packets sent and received, completions, state
 * changes (uroce trace merges them). */
#define UROCE_ENV_TRACE "UROCE_TRACE"

#endif /* UROCE_UROCE_H_ */
