// Shared receive queues.
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "common/export.h"
#include "contract/limits.h"
#include "verbs/objects.h"

namespace uroce::verbs {

namespace {
ibv_srq* create_srq_common(ibv_pd* pd, void* srq_context, ibv_srq_attr* attr, UXrcd* xrcd = nullptr,
                           UCq* cq = nullptr) {
  if (attr->max_wr == 0 || attr->max_wr > core::kLimits.max_srq_wr ||
      attr->max_sge > core::kLimits.max_srq_sge || attr->srq_limit > attr->max_wr) {
    errno = EINVAL;
    return nullptr;
  }
  auto* s = new USrq();
  memset(&s->srq, 0, sizeof(s->srq));
  core::XrcSrqArgs xa{};
  if (xrcd) xa = core::XrcSrqArgs{xrcd->id, upd(pd)->id, cq->core.get()};
  auto core =
      core::Srq::create(uctx(pd->context)->core.get(), attr->max_wr, attr->max_sge ? attr->max_sge : 1,
                        attr->srq_limit, reinterpret_cast<uint64_t>(&s->srq), xrcd ? &xa : nullptr);
  if (!core.is_ok()) {
    delete s;
    errno = core.err();
    return nullptr;
  }
  s->core = std::move(core.value());
  s->upd = upd(pd);
  s->upd->refs++;
  s->xrcd = xrcd;
  if (xrcd) xrcd->refs++;
  s->srq.context = pd->context;
  s->srq.srq_context = srq_context;
  s->srq.pd = pd;
  pthread_mutex_init(&s->srq.mutex, nullptr);
  pthread_cond_init(&s->srq.cond, nullptr);
  attr->max_sge = s->core->max_sge();
  return &s->srq;
}
}  // namespace

UROCE_EXPORT ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* init) {
  return create_srq_common(pd, init->srq_context, &init->attr);
}

ibv_srq* op_create_srq_ex(ibv_context* ctx, ibv_srq_init_attr_ex* attr) {
  const uint32_t known =
      IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  if (attr->comp_mask & ~known) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  const ibv_srq_type type = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? attr->srq_type : IBV_SRQT_BASIC;
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
    errno = EINVAL;
    return nullptr;
  }
  if (type == IBV_SRQT_BASIC) return create_srq_common(attr->pd, attr->srq_context, &attr->attr);
  if (type != IBV_SRQT_XRC) {
    errno = EOPNOTSUPP;  // tag matching
    return nullptr;
  }
  // An XRC SRQ names its domain and its completion queue (man ibv_create_srq_ex).
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd ||
      !(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
    errno = EINVAL;
    return nullptr;
  }
  return create_srq_common(attr->pd, attr->srq_context, &attr->attr, uxrcd(attr->xrcd), ucq(attr->cq));
}

int op_get_srq_num(ibv_srq* srq, uint32_t* srq_num) {
  USrq* s = usrq(srq);
  if (!s->xrcd) return EINVAL;  // only XRC SRQs have numbers
  *srq_num = s->core->srq_num();
  return 0;
}

ibv_xrcd* op_open_xrcd(ibv_context* ctx, ibv_xrcd_init_attr* attr) {
  if (attr->comp_mask &
      ~uint32_t(IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS | IBV_XRCD_INIT_ATTR_RESERVED)) {
    errno = EINVAL;
    return nullptr;
  }
  uint64_t dev = 0, ino = 0;
  int fd = (attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) ? attr->fd : -1;
  if (fd >= 0) {
    // Processes that open the same file share the domain (man ibv_open_xrcd).
    struct stat st;
    if (fstat(fd, &st) != 0) return nullptr;
    dev = st.st_dev;
    ino = st.st_ino;
  } else if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) || !(attr->oflags & O_CREAT)) {
    errno = EINVAL;  // without a file, the domain can only be created
    return nullptr;
  }
  auto id = uctx(ctx)->core->ctl()->open_xrcd(dev, ino);
  if (!id.is_ok()) {
    errno = id.err();
    return nullptr;
  }
  auto* x = new UXrcd();
  x->xrcd.context = ctx;
  x->id = id.value();
  return &x->xrcd;
}

int op_close_xrcd(ibv_xrcd* xrcd) {
  UXrcd* x = uxrcd(xrcd);
  if (x->refs.load()) return EBUSY;
  delete x;
  return 0;
}

UROCE_EXPORT int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
  USrq* s = usrq(srq);
  if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) return EINVAL;
  if (mask & IBV_SRQ_MAX_WR) {
    // Resizing a ring other processes consume from is not supported yet.
    if (attr->max_wr > s->core->max_wr()) return EOPNOTSUPP;
  }
  if (mask & IBV_SRQ_LIMIT) {
    if (attr->srq_limit > s->core->max_wr()) return EINVAL;
    s->core->set_limit(attr->srq_limit);
  }
  return 0;
}

UROCE_EXPORT int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
  USrq* s = usrq(srq);
  attr->max_wr = s->core->max_wr();
  attr->max_sge = s->core->max_sge();
  attr->srq_limit = s->core->limit();
  return 0;
}

UROCE_EXPORT int ibv_destroy_srq(ibv_srq* srq) {
  USrq* s = usrq(srq);
  if (s->core->refs.load()) return EBUSY;
  s->upd->refs--;
  if (s->xrcd) s->xrcd->refs--;
  pthread_mutex_destroy(&srq->mutex);
  pthread_cond_destroy(&srq->cond);
  delete s;
  return 0;
}

int op_post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  auto* s = usrq(srq)->core.get();
  return post_recv_chain(wr, bad,
                         [s](uint64_t id, const core::Sge* g, uint32_t n) { return s->post(id, g, n); });
}

}  // namespace uroce::verbs
