// Shared receive queues.
#include <cerrno>
#include <cstring>

#include "core/limits.h"
#include "verbs/export.h"
#include "verbs/objects.h"

namespace uroce::verbs {

namespace {
ibv_srq* create_srq_common(ibv_pd* pd, void* srq_context, ibv_srq_attr* attr) {
  if (attr->max_wr == 0 || attr->max_wr > core::kLimits.max_srq_wr ||
      attr->max_sge > core::kLimits.max_srq_sge || attr->srq_limit > attr->max_wr) {
    errno = EINVAL;
    return nullptr;
  }
  auto* s = new USrq();
  memset(&s->srq, 0, sizeof(s->srq));
  auto core =
      core::Srq::create(uctx(pd->context)->core.get(), attr->max_wr, attr->max_sge ? attr->max_sge : 1,
                        attr->srq_limit, reinterpret_cast<uint64_t>(&s->srq));
  if (!core.is_ok()) {
    delete s;
    errno = core.err();
    return nullptr;
  }
  s->core = std::move(core.value());
  s->upd = upd(pd);
  s->upd->refs++;
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
  const uint32_t known = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
  if ((attr->comp_mask & ~known) || !(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) ||
      ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC)) {
    errno = EOPNOTSUPP;  // XRC and tag-matching SRQs come later
    return nullptr;
  }
  return create_srq_common(attr->pd, attr->srq_context, &attr->attr);
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
  pthread_mutex_destroy(&srq->mutex);
  pthread_cond_destroy(&srq->cond);
  delete s;
  return 0;
}

int op_post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  USrq* s = usrq(srq);
  for (; wr; wr = wr->next) {
    Status st = wr->num_sge < 0 ? Status(EINVAL)
                                : s->core->post(wr->wr_id, reinterpret_cast<const core::Sge*>(wr->sg_list),
                                                uint32_t(wr->num_sge));
    if (!st) {
      *bad = wr;
      return st.err();
    }
  }
  return 0;
}

}  // namespace uroce::verbs
