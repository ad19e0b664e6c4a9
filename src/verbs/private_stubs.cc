// IBVERBS_PRIVATE_34: the provider-facing interface of rdma-core v44.
//
// rdma-core reserves this version for its own provider libraries. uroce has
// no providers, but Debian's libmlx5.so.1 and libefa.so.1 are NEEDed directly
// by perftest, UCX and libfabric, are linked BIND_NOW, and import these names;
// without them the loader refuses to start those programs (abi.md §2.2).
//
// What can actually run:
//  - verbs_register_driver_34: from the providers' constructors, before main.
//    It keeps nothing, so no provider ever matches a device, and so...
//  - ...ibv_cmd_*, execute_ioctl, _verbs_init_and_alloc_context, verbs_set_ops,
//    verbs_init_cq and verbs_uninit_context are unreachable: only a provider's
//    own context calls them. They fail cleanly anyway (EOPNOTSUPP).
//  - __verbs_log: libefa's error paths log through it (efadv_* on our device).
//  - verbs_allow_disassociate_destroy: read by libmlx5; a data object.
//
// Types that exist only in rdma-core's uninstalled driver.h/kern-abi.h appear
// as void*; only the symbol names and versions matter to the loader.
// ibv_query_gid_type and ibv_read_ibdev_sysfs_file are defined elsewhere.

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "common/export.h"

namespace {

// Log levels of rdma-core's verbs_log (driver.h): NONE, ERR, WARN, INFO, DEBUG.
constexpr uint32_t kVerbsLogNone = 0;
constexpr uint32_t kVerbsLogDebug = 4;

/// Threshold from VERBS_LOG_LEVEL (strtol base 0, as rdma-core reads it),
/// read once. Unset, empty or 0: print nothing.
uint32_t verbs_log_threshold() {
  static const uint32_t threshold = [] {
    const char* env = getenv("VERBS_LOG_LEVEL");
    if (env == nullptr || *env == '\0') return kVerbsLogNone;
    long v = strtol(env, nullptr, 0);
    return v <= 0 ? kVerbsLogNone : static_cast<uint32_t>(v);
  }();
  return threshold;
}

void verbs_vlog(uint32_t level, const char* fmt, va_list ap) {
  uint32_t threshold = verbs_log_threshold();
  if (threshold == kVerbsLogNone || level > threshold || fmt == nullptr) return;
  int saved_errno = errno;
  vfprintf(stderr, fmt, ap);
  errno = saved_errno;
}

void verbs_logf(uint32_t level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void verbs_logf(uint32_t level, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verbs_vlog(level, fmt, ap);
  va_end(ap);
}

/// The int convention of the ibv_cmd_* family: a positive errno.
int unsupported() {
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

template <typename T>
T* unsupported_null() {
  errno = EOPNOTSUPP;
  return nullptr;
}

}  // namespace

// ---- Logging and data ------------------------------------------------------

/// rdma-core's provider logger; providers pass ctx only for the device name
/// they already formatted into fmt. Prints to stderr when level <=
/// VERBS_LOG_LEVEL; preserves errno.
UROCE_EXPORT void __verbs_log(verbs_context* ctx, uint32_t level, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
UROCE_EXPORT void __verbs_log(verbs_context* ctx, uint32_t level, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verbs_vlog(level, fmt, ap);
  va_end(ap);
}

extern "C" {
/// Read by libmlx5 when destroying objects of a disassociated device. uroce
/// devices never disassociate; the value is rdma-core's default. A 1-byte
/// data object, like the original.
UROCE_VISIBLE bool verbs_allow_disassociate_destroy = false;
}

// ---- Provider registration and context setup -------------------------------

/// Called from provider constructors (PROVIDER_DRIVER) before main. The
/// argument is a struct verbs_device_ops whose first member is the provider
/// name. Nothing is kept: uroce enumerates only its own devices.
UROCE_EXPORT void verbs_register_driver_34(const void* ops) {
  if (ops == nullptr || verbs_log_threshold() < kVerbsLogDebug) return;
  const char* name = *static_cast<const char* const*>(ops);
  verbs_logf(kVerbsLogDebug,
             "uroce: ignoring provider \"%s\" (uroce serves its own "
             "devices)\n",
             name != nullptr ? name : "?");
}

UROCE_EXPORT void* _verbs_init_and_alloc_context(ibv_device* device, int cmd_fd, size_t alloc_size,
                                                 verbs_context* context_offset, uint32_t driver_id) {
  return unsupported_null<void>();
}

UROCE_EXPORT ibv_context* verbs_open_device(ibv_device* device, void* private_data) {
  return unsupported_null<ibv_context>();
}

/// ops is a struct verbs_context_ops (driver.h).
UROCE_EXPORT void verbs_set_ops(verbs_context* vctx, const void* ops) {}

UROCE_EXPORT void verbs_uninit_context(verbs_context* context) {}

UROCE_EXPORT void verbs_init_cq(ibv_cq* cq, ibv_context* context, ibv_comp_channel* channel,
                                void* cq_context) {}

// ---- ioctl command buffers -------------------------------------------------

/// cmd is a struct ibv_command_buffer (cmd_ioctl.h).
UROCE_EXPORT int execute_ioctl(ibv_context* context, void* cmd) { return unsupported(); }

/// Sizes a caller's on-stack attribute array. Returning at least num_attrs
/// keeps the caller's own attribute writes in bounds; the linked buffers are
/// only merged by execute_ioctl, which never runs.
UROCE_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void* link) { return num_attrs; }

// ---- ibv_cmd_*: the write()/ioctl() command layer of a provider ------------
// Parameters named cmd/resp/link are kern-abi.h command and response structs;
// vmr/vqp/vcq/vsrq/xrcd/dm/vcounters/flow_action are driver.h wrappers.

// Context and device.
UROCE_EXPORT int ibv_cmd_get_context(verbs_context* context, void* cmd, size_t cmd_size, void* resp,
                                     size_t resp_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_query_context(ibv_context* ctx, void* driver) { return unsupported(); }
UROCE_EXPORT int ibv_cmd_query_device_any(ibv_context* context, const ibv_query_device_ex_input* input,
                                          ibv_device_attr_ex* attr, size_t attr_size, void* resp,
                                          size_t* resp_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_query_port(ibv_context* context, uint8_t port_num, ibv_port_attr* port_attr,
                                    void* cmd, size_t cmd_size) {
  return unsupported();
}

// Protection domains, XRC domains.
UROCE_EXPORT int ibv_cmd_alloc_pd(ibv_context* context, ibv_pd* pd, void* cmd, size_t cmd_size, void* resp,
                                  size_t resp_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_dealloc_pd(ibv_pd* pd) { return unsupported(); }
UROCE_EXPORT int ibv_cmd_open_xrcd(ibv_context* context, void* xrcd, int vxrcd_size, ibv_xrcd_init_attr* attr,
                                   void* cmd, size_t cmd_size, void* resp, size_t resp_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_close_xrcd(void* xrcd) { return unsupported(); }

// Memory regions and windows, device memory.
UROCE_EXPORT int ibv_cmd_reg_mr(ibv_pd* pd, void* addr, size_t length, uint64_t hca_va, int access, void* vmr,
                                void* cmd, size_t cmd_size, void* resp, size_t resp_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_rereg_mr(void* vmr, uint32_t flags, void* addr, size_t length, uint64_t hca_va,
                                  int access, ibv_pd* pd, void* cmd, size_t cmd_size, void* resp,
                                  size_t resp_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_dereg_mr(void* vmr) { return unsupported(); }
UROCE_EXPORT int ibv_cmd_query_mr(ibv_pd* pd, void* vmr, uint32_t mr_handle) { return unsupported(); }
UROCE_EXPORT int ibv_cmd_advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list,
                                   uint32_t num_sge) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                                       int access, void* vmr) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_alloc_mw(ibv_pd* pd, ibv_mw_type type, ibv_mw* mw, void* cmd, size_t cmd_size,
                                  void* resp, size_t resp_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_dealloc_mw(ibv_mw* mw) { return unsupported(); }
UROCE_EXPORT int ibv_cmd_alloc_dm(ibv_context* ctx, const ibv_alloc_dm_attr* dm_attr, void* dm, void* link) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_free_dm(void* dm) { return unsupported(); }
UROCE_EXPORT int ibv_cmd_reg_dm_mr(ibv_pd* pd, void* dm, uint64_t offset, size_t length, unsigned int access,
                                   void* vmr, void* link) {
  return unsupported();
}

// Completion queues.
UROCE_EXPORT int ibv_cmd_create_cq(ibv_context* context, int cqe, ibv_comp_channel* channel, int comp_vector,
                                   ibv_cq* cq, void* cmd, size_t cmd_size, void* resp, size_t resp_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_create_cq_ex(ibv_context* context, const ibv_cq_init_attr_ex* cq_attr, void* vcq,
                                      void* cmd, size_t cmd_size, void* resp, size_t resp_size,
                                      uint32_t cmd_flags) {
  return unsupported();
}
/// poll_cq convention: a negative result is an error (a positive one would be
/// read as a completion count).
UROCE_EXPORT int ibv_cmd_poll_cq(ibv_cq* cq, int ne, ibv_wc* wc) {
  errno = EOPNOTSUPP;
  return -1;
}
UROCE_EXPORT int ibv_cmd_req_notify_cq(ibv_cq* cq, int solicited_only) { return unsupported(); }
UROCE_EXPORT int ibv_cmd_resize_cq(ibv_cq* cq, int cqe, void* cmd, size_t cmd_size, void* resp,
                                   size_t resp_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_destroy_cq(ibv_cq* cq) { return unsupported(); }
UROCE_EXPORT int ibv_cmd_modify_cq(ibv_cq* cq, ibv_modify_cq_attr* attr, void* cmd, size_t cmd_size) {
  return unsupported();
}

// Shared receive queues.
UROCE_EXPORT int ibv_cmd_create_srq(ibv_pd* pd, ibv_srq* srq, ibv_srq_init_attr* attr, void* cmd,
                                    size_t cmd_size, void* resp, size_t resp_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_create_srq_ex(ibv_context* context, void* vsrq, ibv_srq_init_attr_ex* attr_ex,
                                       void* cmd, size_t cmd_size, void* resp, size_t resp_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_modify_srq(ibv_srq* srq, ibv_srq_attr* srq_attr, int srq_attr_mask, void* cmd,
                                    size_t cmd_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_query_srq(ibv_srq* srq, ibv_srq_attr* srq_attr, void* cmd, size_t cmd_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_destroy_srq(ibv_srq* srq) { return unsupported(); }

// Queue pairs.
UROCE_EXPORT int ibv_cmd_create_qp(ibv_pd* pd, ibv_qp* qp, ibv_qp_init_attr* attr, void* cmd, size_t cmd_size,
                                   void* resp, size_t resp_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_create_qp_ex(ibv_context* context, void* vqp, ibv_qp_init_attr_ex* attr_ex,
                                      void* cmd, size_t cmd_size, void* resp, size_t resp_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_create_qp_ex2(ibv_context* context, void* vqp, ibv_qp_init_attr_ex* qp_attr,
                                       void* cmd, size_t cmd_size, void* resp, size_t resp_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_open_qp(ibv_context* context, void* vqp, int vqp_sz, ibv_qp_open_attr* attr,
                                 void* cmd, size_t cmd_size, void* resp, size_t resp_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_query_qp(ibv_qp* qp, ibv_qp_attr* qp_attr, int attr_mask,
                                  ibv_qp_init_attr* qp_init_attr, void* cmd, size_t cmd_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, void* cmd, size_t cmd_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_modify_qp_ex(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, void* cmd,
                                      size_t cmd_size, void* resp, size_t resp_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_destroy_qp(ibv_qp* qp) { return unsupported(); }

// Posting through the kernel (used only by providers without a user-space
// data path). On failure the first WR is reported as the bad one.
UROCE_EXPORT int ibv_cmd_post_send(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  if (bad_wr != nullptr) *bad_wr = wr;
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_post_recv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  if (bad_wr != nullptr) *bad_wr = wr;
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  if (bad_wr != nullptr) *bad_wr = wr;
  return unsupported();
}

// Address handles and multicast.
UROCE_EXPORT int ibv_cmd_create_ah(ibv_pd* pd, ibv_ah* ah, ibv_ah_attr* attr, void* resp, size_t resp_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_destroy_ah(ibv_ah* ah) { return unsupported(); }
UROCE_EXPORT int ibv_cmd_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) { return unsupported(); }
UROCE_EXPORT int ibv_cmd_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) { return unsupported(); }

// Flows, flow actions, work queues, RSS tables, counters.
UROCE_EXPORT int ibv_cmd_create_flow(ibv_qp* qp, ibv_flow* flow_id, ibv_flow_attr* flow_attr, void* ucmd,
                                     size_t ucmd_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_destroy_flow(ibv_flow* flow_id) { return unsupported(); }
UROCE_EXPORT int ibv_cmd_create_flow_action_esp(ibv_context* ctx, ibv_flow_action_esp_attr* attr,
                                                void* flow_action, void* driver) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_modify_flow_action_esp(void* flow_action, ibv_flow_action_esp_attr* attr,
                                                void* driver) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_destroy_flow_action(void* flow_action) { return unsupported(); }
UROCE_EXPORT int ibv_cmd_create_wq(ibv_context* context, ibv_wq_init_attr* wq_init_attr, ibv_wq* wq,
                                   void* cmd, size_t cmd_size, void* resp, size_t resp_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_modify_wq(ibv_wq* wq, ibv_wq_attr* attr, void* cmd, size_t cmd_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_destroy_wq(ibv_wq* wq) { return unsupported(); }
UROCE_EXPORT int ibv_cmd_create_rwq_ind_table(ibv_context* context, ibv_rwq_ind_table_init_attr* init_attr,
                                              ibv_rwq_ind_table* rwq_ind_table, void* resp,
                                              size_t resp_size) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_destroy_rwq_ind_table(ibv_rwq_ind_table* rwq_ind_table) { return unsupported(); }
UROCE_EXPORT int ibv_cmd_create_counters(ibv_context* context, ibv_counters_init_attr* init_attr,
                                         void* vcounters, void* link) {
  return unsupported();
}
UROCE_EXPORT int ibv_cmd_destroy_counters(void* vcounters) { return unsupported(); }
UROCE_EXPORT int ibv_cmd_read_counters(void* vcounters, uint64_t* counters_value, uint32_t ncounters,
                                       uint32_t flags, void* link) {
  return unsupported();
}
