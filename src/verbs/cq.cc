// Completion channels and completion queues (classic and extended polling).
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "common/export.h"
#include "contract/limits.h"
#include "memory/notify.h"
#include "verbs/objects.h"

namespace uroce::verbs {
namespace {
// Live CQs of this process: a wake-up names its CQ by pointer, and anything
// on the host can post to a channel, so a handle is checked before use.
std::mutex g_live_mu;
std::unordered_set<const UCq*> g_live;
void live_add(const UCq* c) {
  std::lock_guard<std::mutex> g(g_live_mu);
  g_live.insert(c);
}
void live_del(const UCq* c) {
  std::lock_guard<std::mutex> g(g_live_mu);
  g_live.erase(c);
}
bool live_has(const UCq* c) {
  std::lock_guard<std::mutex> g(g_live_mu);
  return g_live.count(c) != 0;
}
}  // namespace

bool cq_is_live(const ibv_cq* c) { return live_has(reinterpret_cast<const UCq*>(c)); }

static_assert(int(core::WcStatus::kGeneralErr) == IBV_WC_GENERAL_ERR);
static_assert(int(core::WcStatus::kRnrRetryExcErr) == IBV_WC_RNR_RETRY_EXC_ERR);
static_assert(int(core::WcOpcode::kRecvRdmaWithImm) == IBV_WC_RECV_RDMA_WITH_IMM);
static_assert(int(core::WcOpcode::kFetchAdd) == IBV_WC_FETCH_ADD);
static_assert(core::wc_flags::kGrh == IBV_WC_GRH && core::wc_flags::kWithImm == IBV_WC_WITH_IMM);

UROCE_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  auto* ch = new UChannel();
  ch->ch.context = context;
  ch->ch.refcnt = 0;
  ch->ch.fd = core::notify_open(&ch->id);
  if (ch->ch.fd < 0) {
    int e = errno;
    delete ch;
    errno = e ? e : EMFILE;
    return nullptr;
  }
  return &ch->ch;
}

UROCE_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  UChannel* ch = uchan(channel);
  if (ch->refs.load()) return EBUSY;
  close(channel->fd);
  delete ch;
  return 0;
}

void to_wc(const core::Cqe& c, ibv_wc* wc) {
  wc->wr_id = c.wr_id;
  wc->status = ibv_wc_status(c.status);
  wc->opcode = ibv_wc_opcode(c.opcode);
  wc->vendor_err = 0;
  wc->byte_len = c.byte_len;
  wc->imm_data = c.imm;
  wc->qp_num = c.qp_num;
  wc->src_qp = c.src_qp;
  wc->wc_flags = c.wc_flags;
  wc->pkey_index = c.pkey_index;
  wc->slid = c.slid;
  wc->sl = c.sl;
  wc->dlid_path_bits = c.dlid_path_bits;
}

int op_poll_cq(ibv_cq* cq, int n, ibv_wc* wc) {
  int i = 0;
  return ucq(cq)->core->poll_each(n, [&](const core::Cqe& e) { to_wc(e, &wc[i++]); });
}

int op_req_notify_cq(ibv_cq* cq, int solicited_only) {
  ucq(cq)->core->arm(solicited_only != 0);
  return 0;
}

namespace {

// --- extended CQ polling (ibv_start_poll & friends)

inline UCq* cur(ibv_cq_ex* cq) { return ucq(cq); }

void expose(UCq* c) {
  c->ex.wr_id = c->cur.wr_id;
  c->ex.status = ibv_wc_status(c->cur.status);
}

int ex_start_poll(ibv_cq_ex* cq, ibv_poll_cq_attr* attr) {
  if (attr && attr->comp_mask) return EINVAL;
  UCq* c = cur(cq);
  if (c->core->poll(1, &c->cur) == 0) return ENOENT;
  expose(c);
  return 0;
}
int ex_next_poll(ibv_cq_ex* cq) {
  UCq* c = cur(cq);
  if (c->core->poll_ready(1, &c->cur) == 0) return ENOENT;
  expose(c);
  return 0;
}
void ex_end_poll(ibv_cq_ex*) {}
ibv_wc_opcode ex_read_opcode(ibv_cq_ex* cq) { return ibv_wc_opcode(cur(cq)->cur.opcode); }
uint32_t ex_read_vendor_err(ibv_cq_ex*) { return 0; }
uint32_t ex_read_byte_len(ibv_cq_ex* cq) { return cur(cq)->cur.byte_len; }
__be32 ex_read_imm_data(ibv_cq_ex* cq) { return cur(cq)->cur.imm; }
uint32_t ex_read_qp_num(ibv_cq_ex* cq) { return cur(cq)->cur.qp_num; }
uint32_t ex_read_src_qp(ibv_cq_ex* cq) { return cur(cq)->cur.src_qp; }
unsigned int ex_read_wc_flags(ibv_cq_ex* cq) { return cur(cq)->cur.wc_flags; }
uint32_t ex_read_slid(ibv_cq_ex* cq) { return cur(cq)->cur.slid; }
uint8_t ex_read_sl(ibv_cq_ex* cq) { return cur(cq)->cur.sl; }
uint8_t ex_read_dlid_path_bits(ibv_cq_ex* cq) { return cur(cq)->cur.dlid_path_bits; }
uint64_t ex_read_completion_ts(ibv_cq_ex* cq) { return cur(cq)->cur.timestamp_ns; }
uint64_t ex_read_completion_wallclock_ns(ibv_cq_ex* cq) {
  // Completion stamps are CLOCK_MONOTONIC; shift by the current offset to realtime.
  timespec mono, real;
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &real);
  int64_t off = (int64_t(real.tv_sec) - mono.tv_sec) * 1000000000ll + (real.tv_nsec - mono.tv_nsec);
  return uint64_t(int64_t(cur(cq)->cur.timestamp_ns) + off);
}
uint16_t ex_read_cvlan(ibv_cq_ex*) { return 0; }
uint32_t ex_read_flow_tag(ibv_cq_ex*) { return 0; }
void ex_read_tm_info(ibv_cq_ex*, ibv_wc_tm_info* tm) { memset(tm, 0, sizeof(*tm)); }

constexpr uint64_t kSupportedWcFlags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                                       IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
                                       IBV_WC_EX_WITH_DLID_PATH_BITS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
                                       IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;

UCq* create_cq_common(ibv_context* context, uint32_t cqe, void* cq_context, ibv_comp_channel* channel,
                      int comp_vector, uint64_t wc_flags) {
  if (cqe == 0 || cqe > core::kLimits.max_cqe || comp_vector < 0 ||
      uint32_t(comp_vector) >= core::kLimits.num_comp_vectors) {
    errno = EINVAL;
    return nullptr;
  }
  if (wc_flags & ~kSupportedWcFlags) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  auto* c = new UCq();
  memset(&c->ex, 0, sizeof(c->ex));
  UChannel* ch = channel ? uchan(channel) : nullptr;
  auto core = core::Cq::create(
      uctx(context)->core.get(), cqe, ch ? ch->id : 0, reinterpret_cast<uint64_t>(&c->ex),
      (wc_flags & (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)) !=
          0);
  if (!core.is_ok()) {
    delete c;
    errno = core.err();
    return nullptr;
  }
  c->core = std::move(core.value());
  c->chan = ch;
  c->wc_flags = wc_flags;
  c->ex.context = context;
  c->ex.channel = channel;
  c->ex.cq_context = cq_context;
  c->ex.cqe = int(c->core->reported_cqe());
  pthread_mutex_init(&c->ex.mutex, nullptr);
  pthread_cond_init(&c->ex.cond, nullptr);
  init_cq_ex_ops(c);
  if (ch) ch->refs++;
  live_add(c);
  return c;
}

}  // namespace

void init_cq_ex_ops(UCq* c) {
  ibv_cq_ex& e = c->ex;
  e.start_poll = ex_start_poll;
  e.next_poll = ex_next_poll;
  e.end_poll = ex_end_poll;
  e.read_opcode = ex_read_opcode;
  e.read_vendor_err = ex_read_vendor_err;
  e.read_byte_len = ex_read_byte_len;
  e.read_imm_data = ex_read_imm_data;
  e.read_qp_num = ex_read_qp_num;
  e.read_src_qp = ex_read_src_qp;
  e.read_wc_flags = ex_read_wc_flags;
  e.read_slid = ex_read_slid;
  e.read_sl = ex_read_sl;
  e.read_dlid_path_bits = ex_read_dlid_path_bits;
  e.read_completion_ts = ex_read_completion_ts;
  e.read_cvlan = ex_read_cvlan;
  e.read_flow_tag = ex_read_flow_tag;
  e.read_tm_info = ex_read_tm_info;
  e.read_completion_wallclock_ns = ex_read_completion_wallclock_ns;
}

UROCE_EXPORT ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                                   int comp_vector) {
  if (cqe <= 0) {
    errno = EINVAL;
    return nullptr;
  }
  UCq* c = create_cq_common(context, uint32_t(cqe), cq_context, channel, comp_vector, 0);
  return c ? ibv_cq_ex_to_cq(&c->ex) : nullptr;
}

ibv_cq_ex* op_create_cq_ex(ibv_context* ctx, ibv_cq_init_attr_ex* attr) {
  if (attr->comp_mask & ~uint32_t(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
      (attr->flags & ~uint32_t(IBV_CREATE_CQ_ATTR_SINGLE_THREADED))) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  // A CQ may name a parent domain (its thread domain, its allocators), not a plain PD.
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
      (!attr->parent_domain || !upd(attr->parent_domain)->protection)) {
    errno = EINVAL;
    return nullptr;
  }
  UCq* c = create_cq_common(ctx, attr->cqe, attr->cq_context, attr->channel, int(attr->comp_vector),
                            attr->wc_flags);
  return c ? &c->ex : nullptr;
}

UROCE_EXPORT int ibv_destroy_cq(ibv_cq* cq) {
  UCq* c = ucq(cq);
  if (c->core->refs.load()) return EBUSY;
  if (c->chan) c->chan->refs--;
  live_del(c);
  pthread_mutex_destroy(&c->ex.mutex);
  pthread_cond_destroy(&c->ex.cond);
  delete c;
  return 0;
}

UROCE_EXPORT int ibv_resize_cq(ibv_cq* cq, int cqe) {
  if (cqe <= 0) return EINVAL;
  UCq* c = ucq(cq);
  int err = c->core->resize(uint32_t(cqe)).err();
  if (!err) cq->cqe = int(c->core->reported_cqe());
  return err;
}

UROCE_EXPORT int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  core::NotifyMsg m;
  for (;;) {
    ssize_t n = recv(channel->fd, &m, sizeof(m), 0);
    // EAGAIN with O_NONBLOCK, as the kernel's fd; EINTR when a signal came,
    // as rdma-core's read() returns it: programs end a blocked wait so
    // (qperf's server child stops its test at its SIGALRM).
    if (n < 0) return -1;
    if (n == 0) {
      errno = EIO;  // the channel was shut down: nothing will come
      return -1;
    }
    if (n == sizeof(m) && m.kind == core::kNotifyCq && live_has(reinterpret_cast<const UCq*>(m.handle)) &&
        reinterpret_cast<const UCq*>(m.handle)->ex.channel == channel)
      break;
  }
  auto* c = reinterpret_cast<UCq*>(m.handle);
  *cq = ibv_cq_ex_to_cq(&c->ex);
  *cq_context = c->ex.cq_context;
  return 0;
}

UROCE_EXPORT void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

}  // namespace uroce::verbs
