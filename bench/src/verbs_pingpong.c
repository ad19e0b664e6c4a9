/* An RC SEND ping-pong on libibverbs that sleeps on its completion channel
 * (one CQ for sends and receives, every completion polled after each event,
 * as ibv_rc_pingpong -e does): the client sends a message, the server sends
 * one back, N times; prints the half round trip's p50 and p99 in
 * microseconds. bench/incast.py's latency probe with --latency-events: it
 * waits as tcp_pingpong waits in recv(), so the two compare like with like.
 * (perftest's ib_send_lat -e needs each side's send completion before the
 * peer's reply -- it polls the CQ it expects once per event -- and stops
 * with "Couldn't post send" on a path that drops an ACK, on any NIC.)
 * QP numbers and GIDs travel over TCP on the same port number.
 *
 * Usage: verbs_pingpong -d DEV [-g GIDX] -l PORT [-s SIZE]       (server: one client)
 *        verbs_pingpong -d DEV [-g GIDX] -c ADDR PORT [-s SIZE] [-n N] [-t SECONDS]
 *                                                                 (client: N round trips,
 *                                                                  or fewer in SECONDS)
 * Output (client): "size rounds p50_us p99_us" on one line. Every wait is
 * bounded (10 s without a completion: exit 1). */
#include "bench_util.h"

#include <infiniband/verbs.h>

#include "pingpong_util.h"

enum { kWaitMs = 10000, kDepth = 16 };

struct conn {
  uint32_t qpn, psn;
  union ibv_gid gid;
};

struct pp {
  struct ibv_context* ctx;
  struct ibv_comp_channel* ch;
  struct ibv_pd* pd;
  struct ibv_cq* cq;
  struct ibv_qp* qp;
  struct ibv_mr* mr;
  char* buf;  // [0, size): receive; [size, 2 size): send
  size_t size;
  int sends_out;  // posted, not completed
  int recvs;      // receive completions not yet consumed by the loop
  int ctl;        // server: the client's TCP connection (readable: done); client: -1
};

static void die(const char* what) {
  fprintf(stderr, "verbs_pingpong: %s (%s)\n", what, strerror(errno));
  exit(1);
}

static void post_recv(struct pp* p) {
  struct ibv_sge sge = {(uintptr_t)p->buf, (uint32_t)p->size, p->mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1}, *bad;
  if (ibv_post_recv(p->qp, &wr, &bad)) die("ibv_post_recv");
}

static void post_send(struct pp* p) {
  struct ibv_sge sge = {(uintptr_t)p->buf + p->size, (uint32_t)p->size, p->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = 2, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
                           .send_flags = IBV_SEND_SIGNALED};
  struct ibv_send_wr* bad;
  if (ibv_post_send(p->qp, &wr, &bad)) die("ibv_post_send");
  ++p->sends_out;
}

/* Sleeps until at least one completion arrives, then takes every one;
 * returns 1 instead when the client says it is done (server). */
static int wait_completions(struct pp* p) {
  struct ibv_wc wc[kDepth];
  for (;;) {
    int n = ibv_poll_cq(p->cq, kDepth, wc);
    if (n < 0) die("ibv_poll_cq");
    if (n == 0) {
      struct pollfd pfd[2] = {{p->ch->fd, POLLIN, 0}, {p->ctl, POLLIN, 0}};
      int r = poll(pfd, p->ctl >= 0 ? 2 : 1, kWaitMs);
      if (r == 0) {
        errno = ETIMEDOUT;
        die("no completion");
      }
      if (r < 0) die("poll");
      if (p->ctl >= 0 && pfd[1].revents) return 1;
      if (!pfd[0].revents) continue;
      struct ibv_cq* cq;
      void* cq_ctx;
      if (ibv_get_cq_event(p->ch, &cq, &cq_ctx)) die("ibv_get_cq_event");
      ibv_ack_cq_events(cq, 1);
      if (ibv_req_notify_cq(p->cq, 0)) die("ibv_req_notify_cq");
      continue;  // what came between the poll and the arm
    }
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        fprintf(stderr, "verbs_pingpong: completion %s\n", ibv_wc_status_str(wc[i].status));
        exit(1);
      }
      if (wc[i].wr_id == 1)
        ++p->recvs;
      else
        --p->sends_out;
    }
    return 0;
  }
}

static void setup(struct pp* p, const char* dev, size_t size) {
  int n;
  struct ibv_device** list = ibv_get_device_list(&n);
  if (!list) die("ibv_get_device_list");
  struct ibv_device* d = NULL;
  for (int i = 0; i < n; ++i)
    if (!strcmp(ibv_get_device_name(list[i]), dev)) d = list[i];
  if (!d) {
    fprintf(stderr, "verbs_pingpong: no device %s\n", dev);
    exit(1);
  }
  p->size = size;
  if (!(p->ctx = ibv_open_device(d))) die("ibv_open_device");
  ibv_free_device_list(list);
  if (!(p->ch = ibv_create_comp_channel(p->ctx))) die("ibv_create_comp_channel");
  if (!(p->pd = ibv_alloc_pd(p->ctx))) die("ibv_alloc_pd");
  p->buf = bu_alloc_touched(2 * size, 1);
  if (!(p->mr = ibv_reg_mr(p->pd, p->buf, 2 * size, IBV_ACCESS_LOCAL_WRITE))) die("ibv_reg_mr");
  if (!(p->cq = ibv_create_cq(p->ctx, 2 * kDepth, NULL, p->ch, 0))) die("ibv_create_cq");
  struct ibv_qp_init_attr ia = {.send_cq = p->cq, .recv_cq = p->cq,
                                .cap = {.max_send_wr = kDepth, .max_recv_wr = kDepth,
                                        .max_send_sge = 1, .max_recv_sge = 1},
                                .qp_type = IBV_QPT_RC};
  if (!(p->qp = ibv_create_qp(p->pd, &ia))) die("ibv_create_qp");
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
  if (ibv_modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    die("ibv_modify_qp INIT");
  if (ibv_req_notify_cq(p->cq, 0)) die("ibv_req_notify_cq");
}

static void connect_qp(struct pp* p, int gidx, const struct conn* me, const struct conn* peer) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR,
                          .path_mtu = IBV_MTU_1024,
                          .dest_qp_num = peer->qpn,
                          .rq_psn = peer->psn,
                          .max_dest_rd_atomic = 1,
                          .min_rnr_timer = 12,
                          .ah_attr = {.is_global = 1,
                                      .port_num = 1,
                                      .grh = {.dgid = peer->gid, .sgid_index = (uint8_t)gidx, .hop_limit = 64}}};
  if (ibv_modify_qp(p->qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    die("ibv_modify_qp RTR");
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = me->psn;
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(p->qp, &a,
                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                        IBV_QP_MAX_QP_RD_ATOMIC))
    die("ibv_modify_qp RTS");
}

int main(int argc, char** argv) {
  const char* dev = NULL;
  int gidx = 1;
  struct pp_args a = pp_defaults();
  for (int i = 1; i < argc; ++i) {
    if (pp_option(argc, argv, &i, &a)) continue;
    if (!strcmp(argv[i], "-d") && i + 1 < argc) {
      dev = argv[++i];
    } else if (!strcmp(argv[i], "-g") && i + 1 < argc) {
      gidx = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: %s -d DEV [-g GIDX] -l PORT [-s SIZE] | -d DEV [-g GIDX] -c ADDR PORT [-s SIZE] [-n N] [-t S]\n",
              argv[0]);
      return 2;
    }
  }
  if (!pp_valid(&a) || !dev) return 2;

  struct pp p = {.ctl = -1};
  setup(&p, dev, a.size);
  struct conn me = {.qpn = p.qp->qp_num, .psn = (uint32_t)(bu_now_ns() & 0xffffff)}, peer;
  if (ibv_query_gid(p.ctx, 1, gidx, &me.gid)) die("ibv_query_gid");
  const int fd = a.server ? pp_accept(a.port) : pp_connect(a.addr, a.port);
  pp_full(fd, &me, sizeof(me), 1);
  pp_full(fd, &peer, sizeof(peer), 0);
  for (int i = 0; i < kDepth / 2; ++i) post_recv(&p);
  connect_qp(&p, gidx, &me, &peer);
  char ready = 1;  // both QPs are in RTR with receives posted
  pp_full(fd, &ready, 1, 1);
  pp_full(fd, &ready, 1, 0);

  if (a.server) {
    // Until the client says it is done (it has every reply it waits for).
    p.ctl = fd;
    for (;;) {
      while (p.recvs == 0)
        if (wait_completions(&p)) return 0;
      --p.recvs;
      post_recv(&p);
      while (p.sends_out >= kDepth / 2)
        if (wait_completions(&p)) return 0;
      post_send(&p);
    }
  }
  uint64_t* lat = malloc((size_t)a.n * sizeof(*lat));
  if (!lat) die("malloc");
  const uint64_t end = pp_end(&a);
  long i = 0;
  for (; i < a.n && bu_now_ns() < end; ++i) {
    const uint64_t t0 = bu_now_ns();
    post_send(&p);
    while (p.recvs == 0) wait_completions(&p);
    lat[i] = (bu_now_ns() - t0) / 2;
    --p.recvs;
    post_recv(&p);
    while (p.sends_out >= kDepth / 2) wait_completions(&p);
  }
  pp_full(fd, &ready, 1, 1);
  return pp_report(a.size, lat, i);
}
