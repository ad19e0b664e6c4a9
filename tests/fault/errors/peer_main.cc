// fault_errors_peer: the other process of the fault tests. Reads a PeerHello
// on fd kPeerFd, builds an RC QP connected to the test's QP with `recvs`
// receives posted and a remotely writable/readable buffer, answers
// PeerReady, then idles until the test closes its end or kills it (SIGKILL is
// the point of most tests). Idling is bounded: it exits after 60 s whatever
// happens, so it can never outlive a broken test for long.
#include <infiniband/verbs.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <vector>

#include "fault/errors/peer_protocol.h"
#include "fault/errors/scribble.h"

namespace {

using uroce::fault::kPeerBufBytes;
using uroce::fault::kPeerFd;
using uroce::fault::PeerHello;
using uroce::fault::PeerReady;

constexpr int kGidIndex = 1;
constexpr int kIdleLimitMs = 60000;

int fail(int e) {
  PeerReady r{};
  r.status = e ? e : EIO;
  (void)send(kPeerFd, &r, sizeof(r), MSG_NOSIGNAL);
  return 1;
}

}  // namespace

int main() {
  PeerHello h{};
  pollfd p{kPeerFd, POLLIN, 0};
  if (poll(&p, 1, 10000) != 1 || recv(kPeerFd, &h, sizeof(h), 0) != ssize_t(sizeof(h))) return 2;

  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_context* ctx = nullptr;
  for (int i = 0; list && i < n; ++i)
    if (strcmp(ibv_get_device_name(list[i]), "uroce_lo") == 0) ctx = ibv_open_device(list[i]);
  if (list) ibv_free_device_list(list);
  if (!ctx) return fail(errno ? errno : ENODEV);

  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = pd ? ibv_create_cq(ctx, 256, nullptr, nullptr, 0) : nullptr;
  if (!cq) return fail(errno);
  static std::vector<uint8_t> buf(kPeerBufBytes);
  ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(),
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!mr) return fail(errno);
  ibv_qp_init_attr ia{};
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = 16;
  ia.cap.max_recv_wr = 128;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd, &ia);
  if (!qp) return fail(errno);

  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (int e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return fail(e);
  const uint32_t recvs = h.recvs > 128 ? 128 : h.recvs;
  const uint32_t slice = recvs ? kPeerBufBytes / 2 / recvs : 0;  // receives use the first half
  for (uint32_t i = 0; i < recvs; ++i) {
    ibv_sge s{reinterpret_cast<uint64_t>(buf.data()) + i * slice, slice, mr->lkey};
    ibv_recv_wr w{};
    w.wr_id = i;
    w.sg_list = &s;
    w.num_sge = 1;
    ibv_recv_wr* bad;
    if (int e = ibv_post_recv(qp, &w, &bad)) return fail(e);
  }
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = h.qpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  memcpy(a.ah_attr.grh.dgid.raw, h.gid, 16);
  a.ah_attr.grh.sgid_index = kGidIndex;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.port_num = 1;
  if (int e = ibv_modify_qp(qp, &a,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return fail(e);
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  if (int e = ibv_modify_qp(qp, &a,
                            IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
    return fail(e);

  if (h.corrupt != uroce::fault::kNoCorruption)
    if (int e = uroce::fault::corrupt_segment(h.corrupt, qp->qp_num)) return fail(e);

  PeerReady r{};
  r.qpn = qp->qp_num;
  ibv_gid g{};
  ibv_query_gid(ctx, 1, kGidIndex, &g);
  memcpy(r.gid, g.raw, 16);
  r.addr = reinterpret_cast<uint64_t>(buf.data()) + kPeerBufBytes / 2;  // remote ops use the second half
  r.len = kPeerBufBytes / 2;
  r.rkey = mr->rkey;
  if (send(kPeerFd, &r, sizeof(r), MSG_NOSIGNAL) != ssize_t(sizeof(r))) return 3;

  if (h.err_and_stop_after_first_recv) {
    // Busy-polls, as a program waiting for its message does; 10 s at most.
    const time_t give_up = time(nullptr) + 10;
    ibv_wc wc{};
    while (ibv_poll_cq(cq, 1, &wc) == 0 && time(nullptr) < give_up) {
    }
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_ERR;
    (void)ibv_modify_qp(qp, &a, IBV_QP_STATE);
    raise(SIGSTOP);
  }

  // Idle until the test hangs up (or kills us); never longer than kIdleLimitMs.
  // A PeerCorrupt meanwhile: make it, answer, idle on.
  uroce::fault::PeerCorrupt pc{};
  while (poll(&p, 1, kIdleLimitMs) == 1 && recv(kPeerFd, &pc, sizeof(pc), 0) == ssize_t(sizeof(pc))) {
    PeerReady ack{};
    ack.status = uroce::fault::corrupt_segment(pc.corrupt, qp->qp_num);
    if (send(kPeerFd, &ack, sizeof(ack), MSG_NOSIGNAL) != ssize_t(sizeof(ack))) break;
  }
  ibv_destroy_qp(qp);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  return 0;
}
