// Hidden compat twins: the 33 "name@IBVERBS_1.0" entry points of
// libibverbs 1.0, plus "ibv_register_driver@IBVERBS_1.1".
//
// Only binaries linked against libibverbs 1.0 (2006) bind to these; every
// later link binds to the default "@@IBVERBS_1.1" versions. Those binaries
// expect the 1.0 object layouts (their own ibv_device/ibv_context/ibv_qp
// wrappers, not the verbs.h ones), which uroce does not provide, so each
// twin fails cleanly in the convention of its verb:
//  - pointer results: NULL with errno = EOPNOTSUPP;
//  - int results: EOPNOTSUPP (also stored in errno), except the verbs whose
//    convention is -1 + errno (get_async_event, get_cq_event, query_gid,
//    query_pkey);
//  - void results: nothing.
// No client of the uroce test matrix imports any of them (abi.md §2.1); they
// exist so that the exported symbol set equals the real library's.
//
// The names are deliberately NOT listed in the IBVERBS_1.0 node of
// libibverbs.map; see the comment at the top of that file.

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "common/export.h"

// Object layouts of the 1.0 ABI. Never dereferenced here.
struct ibv_device_1_0;
struct ibv_context_1_0;
struct ibv_pd_1_0;
struct ibv_mr_1_0;
struct ibv_cq_1_0;
struct ibv_srq_1_0;
struct ibv_qp_1_0;
struct ibv_qp_init_attr_1_0;
struct ibv_ah_1_0;

namespace {

template <typename T>
T* fail_null() {
  errno = EOPNOTSUPP;
  return nullptr;
}

int fail_errno() {
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

int fail_minus_one() {
  errno = EOPNOTSUPP;
  return -1;
}

}  // namespace

// clang-format cannot tell that UROCE_SYMVER(...) is an attribute.
// clang-format off

// Device list and device.

UROCE_EXPORT UROCE_SYMVER("ibv_get_device_list@IBVERBS_1.0")
ibv_device_1_0** uroce_compat_ibv_get_device_list_1_0(int* num) {
  if (num != nullptr) *num = 0;
  return fail_null<ibv_device_1_0*>();
}

UROCE_EXPORT UROCE_SYMVER("ibv_free_device_list@IBVERBS_1.0")
void uroce_compat_ibv_free_device_list_1_0(ibv_device_1_0** list) {}

UROCE_EXPORT UROCE_SYMVER("ibv_get_device_name@IBVERBS_1.0")
const char* uroce_compat_ibv_get_device_name_1_0(ibv_device_1_0* device) {
  return fail_null<const char>();
}

UROCE_EXPORT UROCE_SYMVER("ibv_get_device_guid@IBVERBS_1.0")
__be64 uroce_compat_ibv_get_device_guid_1_0(ibv_device_1_0* device) {
  errno = EOPNOTSUPP;
  return 0;
}

UROCE_EXPORT UROCE_SYMVER("ibv_open_device@IBVERBS_1.0")
ibv_context_1_0* uroce_compat_ibv_open_device_1_0(ibv_device_1_0* device) {
  return fail_null<ibv_context_1_0>();
}

UROCE_EXPORT UROCE_SYMVER("ibv_close_device@IBVERBS_1.0")
int uroce_compat_ibv_close_device_1_0(ibv_context_1_0* context) {
  return fail_errno();
}

// Async events.

UROCE_EXPORT UROCE_SYMVER("ibv_get_async_event@IBVERBS_1.0")
int uroce_compat_ibv_get_async_event_1_0(ibv_context_1_0* context,
                                         ibv_async_event* event) {
  return fail_minus_one();
}

UROCE_EXPORT UROCE_SYMVER("ibv_ack_async_event@IBVERBS_1.0")
void uroce_compat_ibv_ack_async_event_1_0(ibv_async_event* event) {}

// Queries.

UROCE_EXPORT UROCE_SYMVER("ibv_query_device@IBVERBS_1.0")
int uroce_compat_ibv_query_device_1_0(ibv_context_1_0* context,
                                      ibv_device_attr* device_attr) {
  return fail_errno();
}

UROCE_EXPORT UROCE_SYMVER("ibv_query_port@IBVERBS_1.0")
int uroce_compat_ibv_query_port_1_0(ibv_context_1_0* context, uint8_t port_num,
                                    ibv_port_attr* port_attr) {
  return fail_errno();
}

UROCE_EXPORT UROCE_SYMVER("ibv_query_gid@IBVERBS_1.0")
int uroce_compat_ibv_query_gid_1_0(ibv_context_1_0* context, uint8_t port_num,
                                   int index, ibv_gid* gid) {
  return fail_minus_one();
}

UROCE_EXPORT UROCE_SYMVER("ibv_query_pkey@IBVERBS_1.0")
int uroce_compat_ibv_query_pkey_1_0(ibv_context_1_0* context, uint8_t port_num,
                                    int index, __be16* pkey) {
  return fail_minus_one();
}

// Protection domains and memory regions.

UROCE_EXPORT UROCE_SYMVER("ibv_alloc_pd@IBVERBS_1.0")
ibv_pd_1_0* uroce_compat_ibv_alloc_pd_1_0(ibv_context_1_0* context) {
  return fail_null<ibv_pd_1_0>();
}

UROCE_EXPORT UROCE_SYMVER("ibv_dealloc_pd@IBVERBS_1.0")
int uroce_compat_ibv_dealloc_pd_1_0(ibv_pd_1_0* pd) { return fail_errno(); }

UROCE_EXPORT UROCE_SYMVER("ibv_reg_mr@IBVERBS_1.0")
ibv_mr_1_0* uroce_compat_ibv_reg_mr_1_0(ibv_pd_1_0* pd, void* addr,
                                        size_t length, int access) {
  return fail_null<ibv_mr_1_0>();
}

UROCE_EXPORT UROCE_SYMVER("ibv_dereg_mr@IBVERBS_1.0")
int uroce_compat_ibv_dereg_mr_1_0(ibv_mr_1_0* mr) { return fail_errno(); }

// Completion queues.

UROCE_EXPORT UROCE_SYMVER("ibv_create_cq@IBVERBS_1.0")
ibv_cq_1_0* uroce_compat_ibv_create_cq_1_0(ibv_context_1_0* context, int cqe,
                                           void* cq_context,
                                           ibv_comp_channel* channel,
                                           int comp_vector) {
  return fail_null<ibv_cq_1_0>();
}

UROCE_EXPORT UROCE_SYMVER("ibv_resize_cq@IBVERBS_1.0")
int uroce_compat_ibv_resize_cq_1_0(ibv_cq_1_0* cq, int cqe) {
  return fail_errno();
}

UROCE_EXPORT UROCE_SYMVER("ibv_destroy_cq@IBVERBS_1.0")
int uroce_compat_ibv_destroy_cq_1_0(ibv_cq_1_0* cq) { return fail_errno(); }

UROCE_EXPORT UROCE_SYMVER("ibv_get_cq_event@IBVERBS_1.0")
int uroce_compat_ibv_get_cq_event_1_0(ibv_comp_channel* channel,
                                      ibv_cq_1_0** cq, void** cq_context) {
  return fail_minus_one();
}

UROCE_EXPORT UROCE_SYMVER("ibv_ack_cq_events@IBVERBS_1.0")
void uroce_compat_ibv_ack_cq_events_1_0(ibv_cq_1_0* cq, unsigned int nevents) {}

// Shared receive queues.

UROCE_EXPORT UROCE_SYMVER("ibv_create_srq@IBVERBS_1.0")
ibv_srq_1_0* uroce_compat_ibv_create_srq_1_0(ibv_pd_1_0* pd,
                                             ibv_srq_init_attr* srq_init_attr) {
  return fail_null<ibv_srq_1_0>();
}

UROCE_EXPORT UROCE_SYMVER("ibv_modify_srq@IBVERBS_1.0")
int uroce_compat_ibv_modify_srq_1_0(ibv_srq_1_0* srq, ibv_srq_attr* srq_attr,
                                    int srq_attr_mask) {
  return fail_errno();
}

UROCE_EXPORT UROCE_SYMVER("ibv_query_srq@IBVERBS_1.0")
int uroce_compat_ibv_query_srq_1_0(ibv_srq_1_0* srq, ibv_srq_attr* srq_attr) {
  return fail_errno();
}

UROCE_EXPORT UROCE_SYMVER("ibv_destroy_srq@IBVERBS_1.0")
int uroce_compat_ibv_destroy_srq_1_0(ibv_srq_1_0* srq) { return fail_errno(); }

// Queue pairs.

UROCE_EXPORT UROCE_SYMVER("ibv_create_qp@IBVERBS_1.0")
ibv_qp_1_0* uroce_compat_ibv_create_qp_1_0(ibv_pd_1_0* pd,
                                           ibv_qp_init_attr_1_0* qp_init_attr) {
  return fail_null<ibv_qp_1_0>();
}

UROCE_EXPORT UROCE_SYMVER("ibv_query_qp@IBVERBS_1.0")
int uroce_compat_ibv_query_qp_1_0(ibv_qp_1_0* qp, ibv_qp_attr* attr,
                                  int attr_mask,
                                  ibv_qp_init_attr_1_0* init_attr) {
  return fail_errno();
}

UROCE_EXPORT UROCE_SYMVER("ibv_modify_qp@IBVERBS_1.0")
int uroce_compat_ibv_modify_qp_1_0(ibv_qp_1_0* qp, ibv_qp_attr* attr,
                                   int attr_mask) {
  return fail_errno();
}

UROCE_EXPORT UROCE_SYMVER("ibv_destroy_qp@IBVERBS_1.0")
int uroce_compat_ibv_destroy_qp_1_0(ibv_qp_1_0* qp) { return fail_errno(); }

// Address handles and multicast.

UROCE_EXPORT UROCE_SYMVER("ibv_create_ah@IBVERBS_1.0")
ibv_ah_1_0* uroce_compat_ibv_create_ah_1_0(ibv_pd_1_0* pd, ibv_ah_attr* attr) {
  return fail_null<ibv_ah_1_0>();
}

UROCE_EXPORT UROCE_SYMVER("ibv_destroy_ah@IBVERBS_1.0")
int uroce_compat_ibv_destroy_ah_1_0(ibv_ah_1_0* ah) { return fail_errno(); }

UROCE_EXPORT UROCE_SYMVER("ibv_attach_mcast@IBVERBS_1.0")
int uroce_compat_ibv_attach_mcast_1_0(ibv_qp_1_0* qp, ibv_gid* gid,
                                      uint16_t lid) {
  return fail_errno();
}

UROCE_EXPORT UROCE_SYMVER("ibv_detach_mcast@IBVERBS_1.0")
int uroce_compat_ibv_detach_mcast_1_0(ibv_qp_1_0* qp, ibv_gid* gid,
                                      uint16_t lid) {
  return fail_errno();
}

// Pre-rdma-core-13 provider registration. Providers have registered through
// verbs_register_driver_<N> (IBVERBS_PRIVATE_<N>) since then; an old
// provider calling this must not crash, and there is nothing to register.
UROCE_EXPORT UROCE_SYMVER("ibv_register_driver@IBVERBS_1.1")
void uroce_compat_ibv_register_driver_1_1(const char* name, void* init_func) {}
// clang-format on
