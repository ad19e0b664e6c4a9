// Every op slot of ibv_context_ops and verbs_context: the implemented ones,
// and for the rest a default that fails cleanly (EOPNOTSUPP, or NULL with
// errno) instead of leaving a NULL slot that inline code would call.
#include <cerrno>
#include <cstring>

#include "common/export.h"
#include "verbs/objects.h"

UROCE_EXPORT int ibv_query_device(ibv_context* context, ibv_device_attr* device_attr);

namespace uroce::verbs {
namespace {

template <typename R, typename... A>
R fail_ptr(A...) {
  errno = EOPNOTSUPP;
  return nullptr;
}
template <typename... A>
int fail_int(A...) {
  return EOPNOTSUPP;
}
void* compat_unsupported() {
  errno = EOPNOTSUPP;
  return nullptr;
}
void placeholder() {}

int compat_query_port(ibv_context* c, uint8_t port, _compat_ibv_port_attr* a) {
  return op_query_port(c, port, reinterpret_cast<ibv_port_attr*>(a),
                       offsetof(ibv_port_attr, port_cap_flags2));
}

}  // namespace

void init_context_ops(UContext* uc) {
  ibv_context_ops& o = uc->vctx.context.ops;
  o._compat_query_device = ::ibv_query_device;
  o._compat_query_port = compat_query_port;
  o._compat_alloc_pd = compat_unsupported;
  o._compat_dealloc_pd = compat_unsupported;
  o._compat_reg_mr = compat_unsupported;
  o._compat_rereg_mr = compat_unsupported;
  o._compat_dereg_mr = compat_unsupported;
  o.alloc_mw = op_alloc_mw;
  o.bind_mw = op_bind_mw;
  o.dealloc_mw = op_dealloc_mw;
  o._compat_create_cq = compat_unsupported;
  o.poll_cq = op_poll_cq;
  o.req_notify_cq = op_req_notify_cq;
  o._compat_cq_event = compat_unsupported;
  o._compat_resize_cq = compat_unsupported;
  o._compat_destroy_cq = compat_unsupported;
  o._compat_create_srq = compat_unsupported;
  o._compat_modify_srq = compat_unsupported;
  o._compat_query_srq = compat_unsupported;
  o._compat_destroy_srq = compat_unsupported;
  o.post_srq_recv = op_post_srq_recv;
  o._compat_create_qp = compat_unsupported;
  o._compat_query_qp = compat_unsupported;
  o._compat_modify_qp = compat_unsupported;
  o._compat_destroy_qp = compat_unsupported;
  o.post_send = op_post_send;
  o.post_recv = op_post_recv;
  o._compat_create_ah = compat_unsupported;
  o._compat_destroy_ah = compat_unsupported;
  o._compat_attach_mcast = compat_unsupported;
  o._compat_detach_mcast = compat_unsupported;
  o._compat_async_event = compat_unsupported;

  verbs_context& v = uc->vctx;
  v.query_port = op_query_port;
  v.advise_mr = op_advise_mr;
  v.alloc_null_mr = fail_ptr<ibv_mr*, ibv_pd*>;
  v.read_counters = fail_int<ibv_counters*, uint64_t*, uint32_t, uint32_t>;
  v.attach_counters_point_flow = fail_int<ibv_counters*, ibv_counter_attach_attr*, ibv_flow*>;
  v.create_counters = fail_ptr<ibv_counters*, ibv_context*, ibv_counters_init_attr*>;
  v.destroy_counters = fail_int<ibv_counters*>;
  v.reg_dm_mr = op_reg_dm_mr;
  v.alloc_dm = op_alloc_dm;
  v.free_dm = op_free_dm;
  v.modify_flow_action_esp = fail_int<ibv_flow_action*, ibv_flow_action_esp_attr*>;
  v.destroy_flow_action = fail_int<ibv_flow_action*>;
  v.create_flow_action_esp = fail_ptr<ibv_flow_action*, ibv_context*, ibv_flow_action_esp_attr*>;
  v.modify_qp_rate_limit = op_modify_qp_rate_limit;
  v.alloc_parent_domain = op_alloc_parent_domain;
  v.dealloc_td = op_dealloc_td;
  v.alloc_td = op_alloc_td;
  v.modify_cq = fail_int<ibv_cq*, ibv_modify_cq_attr*>;
  v.post_srq_ops = fail_int<ibv_srq*, ibv_ops_wr*, ibv_ops_wr**>;
  v.destroy_rwq_ind_table = op_destroy_rwq_ind_table;
  v.create_rwq_ind_table = op_create_rwq_ind_table;
  v.destroy_wq = op_destroy_wq;
  v.modify_wq = op_modify_wq;
  v.create_wq = op_create_wq;
  v.query_rt_values = op_query_rt_values;
  v.create_cq_ex = op_create_cq_ex;
  v.priv = nullptr;  // opaque to programs; uroce keeps its state in UContext
  v.query_device_ex = op_query_device_ex;
  v.ibv_destroy_flow = op_destroy_flow;
  v.ABI_placeholder2 = placeholder;
  v.ibv_create_flow = op_create_flow;
  v.ABI_placeholder1 = placeholder;
  v.open_qp = op_open_qp;
  v.create_qp_ex = op_create_qp_ex;
  v.get_srq_num = op_get_srq_num;
  v.create_srq_ex = op_create_srq_ex;
  v.open_xrcd = op_open_xrcd;
  v.close_xrcd = op_close_xrcd;
  v._ABI_placeholder3 = 0;
  v.sz = sizeof(verbs_context);
  v.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
}

}  // namespace uroce::verbs
