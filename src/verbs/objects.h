// The C ABI objects handed to programs, each embedding the libibverbs struct
// the program reads (layout is the contract: see research/abi.md) and owning
// its core object. Only src/verbs includes <infiniband/verbs.h>.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "contract/device_info.h"
#include "contract/flow_rule.h"
#include "contract/types.h"
#include "core/context.h"
#include "core/cq.h"
#include "core/device_memory.h"
#include "core/qp.h"
#include "core/srq.h"

namespace uroce::verbs {

/// Laid out like rdma-core's struct verbs_device: the word after ibv_device is
/// the provider-ops pointer that libmlx5/libefa compare against their own, so
/// ours (nullptr) makes their probes say "not mine".
struct UDevice {
  ibv_device dev;
  const void* verbs_ops;
  uint32_t index;
  core::DeviceInfo info;
};

/// What the contexts sharing one core context (ibv_open_device's, and those
/// ibv_import_device made from its cmd_fd) know of each other's objects, by
/// the handle a program imports them with (verbs/import.cc). MRs need no
/// entry: their handle is their key, which the core context looks up.
struct SharedObjects {
  std::mutex mu;
  std::unordered_set<uint32_t> pds;
  std::unordered_map<uint32_t, std::shared_ptr<core::DeviceMemory>> dms;
};

struct UContext {
  verbs_context vctx;  // ibv_context is its last member
  UDevice* udev;
  std::shared_ptr<core::Context> core;  // shared with the contexts imported from it
  std::shared_ptr<SharedObjects> shared;
  // cmd_fd's file (a memfd of its own): what an import names; 0: none can.
  uint64_t cmd_dev = 0, cmd_ino = 0;
};

struct UTd {
  ibv_td td;
  std::atomic<int> refs{0};  // parent domains using it (dealloc -> EBUSY)
};

/// A protection domain, or a parent domain (ibv_alloc_parent_domain) that
/// stands for the protection domain it extends: same id, so whatever is
/// created through either shares one PD.
struct UPd {
  ibv_pd pd;
  uint32_t id;
  std::atomic<int> refs{0};   // MRs, QPs, SRQs, AHs, parent domains (dealloc -> EBUSY)
  UPd* protection = nullptr;  // parent domain: the PD it extends
  UTd* td = nullptr;          // parent domain: its thread domain, if any
};

struct UDm {
  ibv_dm dm;
  std::shared_ptr<core::DeviceMemory> core;  // shared with its imports
};
inline UDm* udm(ibv_dm* d) { return reinterpret_cast<UDm*>(d); }

struct UMr {
  ibv_mr mr;
  UPd* upd;
  UDm* dm = nullptr;  // ibv_reg_dm_mr: the device memory it maps
};

struct UMw {
  ibv_mw mw;  // handle: the key the window was allocated with (its slot)
  UPd* upd;
};
inline UMw* umw(ibv_mw* m) { return reinterpret_cast<UMw*>(m); }

struct UChannel {
  ibv_comp_channel ch;
  uint32_t id;
  std::atomic<int> refs{0};  // CQs using it (destroy -> EBUSY)
};

struct UCq {
  ibv_cq_ex ex;  // ibv_cq is its prefix
  std::unique_ptr<core::Cq> core;
  UChannel* chan;
  uint64_t wc_flags;  // IBV_WC_EX_WITH_* requested
  core::Cqe cur;      // the completion start_poll/next_poll exposed
};

struct UAh {
  ibv_ah ah;
  core::AddressVector av;
  UPd* upd;
};

struct UXrcd {
  ibv_xrcd xrcd;
  uint32_t id;               // host-wide: processes opening the same file share it
  std::atomic<int> refs{0};  // XRC SRQs and target QPs (close -> EBUSY)
};
inline UXrcd* uxrcd(ibv_xrcd* x) { return reinterpret_cast<UXrcd*>(x); }

struct USrq {
  ibv_srq srq;
  std::unique_ptr<core::Srq> core;
  UPd* upd;
  UXrcd* xrcd;  // XRC SRQs
};

/// A work queue (wq.cc): a receive queue and its CQ, the core's RAW_PACKET
/// QP without a send side.
struct UWq {
  ibv_wq wq;
  std::unique_ptr<core::Qp> core;
  UPd* upd;
  UCq* cq;
  std::atomic<int> refs{0};  // indirection tables naming it
};
inline UWq* uwq(ibv_wq* w) { return reinterpret_cast<UWq*>(w); }

/// An indirection table of work queues (wq.cc).
struct UIndTable {
  ibv_rwq_ind_table table;
  std::vector<UWq*> wqs;
  std::atomic<int> refs{0};  // RSS QPs using it
};
inline UIndTable* uind(ibv_rwq_ind_table* t) { return reinterpret_cast<UIndTable*>(t); }

/// State of one ibv_wr_start()..ibv_wr_complete() batch.
struct WrBatch {
  std::vector<ibv_send_wr> wrs;
  std::vector<std::vector<ibv_sge>> sges;
  std::vector<std::vector<uint8_t>> inl;
  bool open = false;
  int err = 0;
};

struct UQp {
  ibv_qp_ex ex;  // ibv_qp is its prefix, so ibv_qp_to_qp_ex is a cast
  std::unique_ptr<core::Qp> core;
  UPd* upd;
  UCq* send_cq;
  UCq* recv_cq;
  USrq* srq;
  UXrcd* xrcd;           // XRC target QPs
  UIndTable* ind_table;  // RSS QPs
  WrBatch batch;
};

inline UContext* uctx(ibv_context* c) {
  return reinterpret_cast<UContext*>(reinterpret_cast<char*>(c) - offsetof(verbs_context, context));
}
inline UCq* ucq(ibv_cq* c) { return reinterpret_cast<UCq*>(c); }
/// Whether `c` is a CQ of this process that was not destroyed (verbs/cq.cc):
/// a stale pointer is refused as the kernel refuses a stale handle.
bool cq_is_live(const ibv_cq* c);
inline UCq* ucq(ibv_cq_ex* c) { return reinterpret_cast<UCq*>(c); }
inline UQp* uqp(ibv_qp* q) { return reinterpret_cast<UQp*>(q); }
inline UQp* uqp(ibv_qp_ex* q) { return reinterpret_cast<UQp*>(q); }
inline UPd* upd(ibv_pd* p) { return reinterpret_cast<UPd*>(p); }
inline UMr* umr(ibv_mr* m) { return reinterpret_cast<UMr*>(m); }
inline USrq* usrq(ibv_srq* s) { return reinterpret_cast<USrq*>(s); }
inline UAh* uah(ibv_ah* a) { return reinterpret_cast<UAh*>(a); }
inline UChannel* uchan(ibv_comp_channel* c) { return reinterpret_cast<UChannel*>(c); }

/// Converts between ibv_ah_attr and the core address vector.
core::AddressVector to_av(const ibv_ah_attr& a);
ibv_ah_attr from_av(const core::AddressVector& av);
/// Fills the ibv_context ops and verbs_context extension slots (context_ops.cc).
void init_context_ops(UContext* c);
/// Copies one core completion into an ibv_wc.
void to_wc(const core::Cqe& c, ibv_wc* wc);
/// CQ-ex polling callbacks (cq.cc).
void init_cq_ex_ops(UCq* cq);
/// New post-send API callbacks (qp_ex.cc).
void init_qp_ex_ops(UQp* qp);
/// Posts a chain of receive requests through `post(wr_id, sges, num_sge)`
/// (a QP's, a work queue's or an SRQ's queue); the first one refused stops
/// the chain and is named in *bad, as ibv_post_recv(3) describes.
template <class Post>
int post_recv_chain(ibv_recv_wr* wr, ibv_recv_wr** bad, Post&& post) {
  for (; wr; wr = wr->next) {
    Status st = wr->num_sge < 0
                    ? Status(EINVAL)
                    : post(wr->wr_id, reinterpret_cast<const core::Sge*>(wr->sg_list), uint32_t(wr->num_sge));
    if (!st) {
      *bad = wr;
      return st.err();
    }
  }
  return 0;
}
/// Builds the core send WQE for one ibv_send_wr (qp.cc).
int post_send_one(UQp* q, const ibv_send_wr* wr);

// The ops that inline verbs call through the context (defined where they belong).
int op_poll_cq(ibv_cq* cq, int n, ibv_wc* wc);
int op_req_notify_cq(ibv_cq* cq, int solicited_only);
int op_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int op_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int op_post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);
int op_modify_qp_rate_limit(ibv_qp* qp, ibv_qp_rate_limit_attr* attr);
int op_query_port(ibv_context* ctx, uint8_t port, ibv_port_attr* attr, size_t attr_len);
int op_query_rt_values(ibv_context* ctx, ibv_values_ex* values);
int op_query_device_ex(ibv_context* ctx, const ibv_query_device_ex_input* in, ibv_device_attr_ex* attr,
                       size_t attr_len);
ibv_cq_ex* op_create_cq_ex(ibv_context* ctx, ibv_cq_init_attr_ex* attr);
ibv_qp* op_create_qp_ex(ibv_context* ctx, ibv_qp_init_attr_ex* attr);
ibv_qp* op_open_qp(ibv_context* ctx, ibv_qp_open_attr* attr);
ibv_flow* op_create_flow(ibv_qp* qp, ibv_flow_attr* attr);
int op_destroy_flow(ibv_flow* flow);
ibv_wq* op_create_wq(ibv_context* ctx, ibv_wq_init_attr* attr);
int op_modify_wq(ibv_wq* wq, ibv_wq_attr* attr);
int op_destroy_wq(ibv_wq* wq);
ibv_rwq_ind_table* op_create_rwq_ind_table(ibv_context* ctx, ibv_rwq_ind_table_init_attr* attr);
int op_destroy_rwq_ind_table(ibv_rwq_ind_table* table);
/// Checks a flow attribute and its specs (flow.cc); 0 and the rule, or an errno.
int parse_flow_attr(const ibv_flow_attr* a, core::FlowRule* r);
ibv_srq* op_create_srq_ex(ibv_context* ctx, ibv_srq_init_attr_ex* attr);
int op_get_srq_num(ibv_srq* srq, uint32_t* srq_num);
ibv_xrcd* op_open_xrcd(ibv_context* ctx, ibv_xrcd_init_attr* attr);
int op_close_xrcd(ibv_xrcd* xrcd);
ibv_td* op_alloc_td(ibv_context* ctx, ibv_td_init_attr* attr);
int op_dealloc_td(ibv_td* td);
ibv_pd* op_alloc_parent_domain(ibv_context* ctx, ibv_parent_domain_init_attr* attr);
ibv_mw* op_alloc_mw(ibv_pd* pd, ibv_mw_type type);
int op_dealloc_mw(ibv_mw* mw);
int op_bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind);
/// What binding `mw` to `info` under `new_key` asks of the core (mw.cc).
core::WindowBind window_bind(const ibv_mw* mw, uint32_t new_key, const ibv_mw_bind_info& info);
int op_advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list, uint32_t num_sge);
ibv_dm* op_alloc_dm(ibv_context* ctx, ibv_alloc_dm_attr* attr);
int op_free_dm(ibv_dm* dm);
ibv_mr* op_reg_dm_mr(ibv_pd* pd, ibv_dm* dm, uint64_t dm_offset, size_t length, unsigned int access);
/// Registers [addr, addr+length) addressed from `iova` (pd_mr.cc); errno on failure.
ibv_mr* reg_mr_common(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access);

}  // namespace uroce::verbs
