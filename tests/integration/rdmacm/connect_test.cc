// Connections through the drop-in librdmacm.so.1 between ids of one host
// (uroce_lo, 127.0.0.1): connect/accept with private data both ways and a
// SEND over the QPs the CM moved; reject; no listener; a port taken twice;
// a program that moves its own QP (CONNECT_RESPONSE, rdma_init_qp_attr,
// rdma_establish); the death of the peer's process; UD ids (SIDR).
//
// Runs in a private network namespace (in_private_netns.sh).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

sockaddr_in lo(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

sockaddr* sa(sockaddr_in& a) { return reinterpret_cast<sockaddr*>(&a); }

/// The next event on `ch` (bounded wait), which the caller acknowledges.
rdma_cm_event* next_event(rdma_event_channel* ch, int ms = 5000) {
  pollfd p{ch->fd, POLLIN, 0};
  if (poll(&p, 1, ms) != 1) return nullptr;
  rdma_cm_event* e = nullptr;
  return rdma_get_cm_event(ch, &e) == 0 ? e : nullptr;
}

/// Expects the next event on `ch` to be `type`; returns it (to be acked).
rdma_cm_event* expect(rdma_event_channel* ch, rdma_cm_event_type type) {
  rdma_cm_event* e = next_event(ch);
  EXPECT_NE(e, nullptr) << "no " << rdma_event_str(type);
  if (e) {
    EXPECT_EQ(e->event, type) << rdma_event_str(e->event) << " status " << e->status;
  }
  return e;
}

ibv_qp_init_attr rc_attr() {
  ibv_qp_init_attr a{};
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = 8;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  return a;
}

/// Where a UD datagram goes.
struct UdDest {
  ibv_ah* ah;
  uint32_t qpn, qkey;
};

/// Sends `sbuf` from c's QP to s's, which receives it into `rbuf`
/// (`ud`: the datagram's address handle, QP number and Q_Key); the
/// receive's completion goes to *wc. Memory registered for the occasion.
void send_one(rdma_cm_id* c, rdma_cm_id* s, std::vector<char>& sbuf, std::vector<char>& rbuf, ibv_wc* wc,
              const UdDest* ud = nullptr) {
  ibv_mr* smr = ibv_reg_mr(c->qp->pd, sbuf.data(), sbuf.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* rmr = ibv_reg_mr(s->qp->pd, rbuf.data(), rbuf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_TRUE(smr && rmr);
  ibv_sge rs{reinterpret_cast<uint64_t>(rbuf.data()), uint32_t(rbuf.size()), rmr->lkey};
  ibv_recv_wr rw{};
  rw.sg_list = &rs;
  rw.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  ASSERT_EQ(ibv_post_recv(s->qp, &rw, &rbad), 0);
  ibv_sge ss{reinterpret_cast<uint64_t>(sbuf.data()), uint32_t(sbuf.size()), smr->lkey};
  ibv_send_wr sw{};
  sw.sg_list = &ss;
  sw.num_sge = 1;
  sw.opcode = IBV_WR_SEND;
  sw.send_flags = IBV_SEND_SIGNALED;
  if (ud) {
    sw.wr.ud.ah = ud->ah;
    sw.wr.ud.remote_qpn = ud->qpn;
    sw.wr.ud.remote_qkey = ud->qkey;
  }
  ibv_send_wr* sbad = nullptr;
  ASSERT_EQ(ibv_post_send(c->qp, &sw, &sbad), 0);
  int n = 0;
  for (int i = 0; i < 500000 && n == 0; ++i) n = ibv_poll_cq(s->recv_cq, 1, wc);
  ASSERT_EQ(n, 1);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc->status);
  ibv_dereg_mr(smr);
  ibv_dereg_mr(rmr);
}

class Connect : public ::testing::Test {
 protected:
  void SetUp() override {
    sch_ = rdma_create_event_channel();
    cch_ = rdma_create_event_channel();
    ASSERT_TRUE(sch_ && cch_);
  }
  void TearDown() override {
    for (rdma_cm_id* id : ids_) {
      if (id->qp) rdma_destroy_qp(id);
      rdma_destroy_id(id);
    }
    rdma_destroy_event_channel(sch_);
    rdma_destroy_event_channel(cch_);
  }
  rdma_cm_id* listen_on(uint16_t port) {
    rdma_cm_id* l = nullptr;
    EXPECT_EQ(rdma_create_id(sch_, &l, nullptr, RDMA_PS_TCP), 0);
    auto a = lo(port);
    EXPECT_EQ(rdma_bind_addr(l, sa(a)), 0) << strerror(errno);
    EXPECT_EQ(rdma_listen(l, 4), 0) << strerror(errno);
    ids_.push_back(l);
    return l;
  }
  /// A client id with its address and route resolved (and a QP if `qp`).
  rdma_cm_id* client_to(uint16_t port, bool qp = true, uint32_t ip = INADDR_LOOPBACK) {
    rdma_cm_id* c = nullptr;
    EXPECT_EQ(rdma_create_id(cch_, &c, nullptr, RDMA_PS_TCP), 0);
    ids_.push_back(c);
    auto a = lo(port);
    a.sin_addr.s_addr = htonl(ip);
    EXPECT_EQ(rdma_resolve_addr(c, nullptr, sa(a), 1000), 0);
    rdma_ack_cm_event(expect(cch_, RDMA_CM_EVENT_ADDR_RESOLVED));
    EXPECT_EQ(rdma_resolve_route(c, 1000), 0);
    rdma_ack_cm_event(expect(cch_, RDMA_CM_EVENT_ROUTE_RESOLVED));
    if (qp) {
      ibv_qp_init_attr at = rc_attr();
      EXPECT_EQ(rdma_create_qp(c, nullptr, &at), 0) << strerror(errno);
    }
    return c;
  }
  rdma_event_channel* sch_ = nullptr;
  rdma_event_channel* cch_ = nullptr;
  std::vector<rdma_cm_id*> ids_;
};

TEST_F(Connect, AcceptedConnectionCarriesPrivateDataAndASend) {
  rdma_cm_id* l = listen_on(7471);
  rdma_cm_id* c = client_to(7471);
  const char hello[] = "hello from the client";
  rdma_conn_param cp{};
  cp.private_data = hello;
  cp.private_data_len = sizeof(hello);
  cp.responder_resources = cp.initiator_depth = 1;
  cp.retry_count = 7;
  cp.rnr_retry_count = 7;
  ASSERT_EQ(rdma_connect(c, &cp), 0) << strerror(errno);

  rdma_cm_event* req = expect(sch_, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(req->listen_id, l);
  rdma_cm_id* s = req->id;
  ids_.push_back(s);
  EXPECT_EQ(req->param.conn.private_data_len, 56);
  EXPECT_STREQ(static_cast<const char*>(req->param.conn.private_data), hello);
  EXPECT_EQ(req->param.conn.qp_num, c->qp->qp_num);
  EXPECT_STREQ(ibv_get_device_name(s->verbs->device), "uroce_lo");
  EXPECT_EQ(ntohs(rdma_get_src_port(s)), 7471);
  EXPECT_EQ(rdma_get_dst_port(s), rdma_get_src_port(c));
  rdma_ack_cm_event(req);

  ibv_qp_init_attr at = rc_attr();
  ASSERT_EQ(rdma_create_qp(s, nullptr, &at), 0) << strerror(errno);
  const char world[] = "and from the server";
  rdma_conn_param ap{};
  ap.private_data = world;
  ap.private_data_len = sizeof(world);
  ap.responder_resources = ap.initiator_depth = 1;
  ap.rnr_retry_count = 7;
  ASSERT_EQ(rdma_accept(s, &ap), 0) << strerror(errno);

  rdma_cm_event* est = expect(cch_, RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_NE(est, nullptr);
  EXPECT_STREQ(static_cast<const char*>(est->param.conn.private_data), world);
  EXPECT_EQ(est->param.conn.qp_num, s->qp->qp_num);
  rdma_ack_cm_event(est);
  rdma_ack_cm_event(expect(sch_, RDMA_CM_EVENT_ESTABLISHED));

  // The QPs are connected: a SEND arrives.
  std::vector<char> sbuf(64, 'x'), rbuf(64, 0);
  ibv_wc wc{};
  ASSERT_NO_FATAL_FAILURE(send_one(c, s, sbuf, rbuf, &wc));
  EXPECT_EQ(rbuf, sbuf);

  // Either side's disconnect reaches both.
  ASSERT_EQ(rdma_disconnect(c), 0);
  rdma_ack_cm_event(expect(cch_, RDMA_CM_EVENT_DISCONNECTED));
  rdma_ack_cm_event(expect(sch_, RDMA_CM_EVENT_DISCONNECTED));
  EXPECT_EQ(rdma_disconnect(s), 0);  // disconnected already: nothing more
}

// RDMA_OPTION_ID_ACK_TIMEOUT (rdma_set_option(3)) on either side's id
// before connect/accept: that QP's local ACK timeout at RTS (rdma-core's
// test_rdmacm_async_traffic checks it with ibv_query_qp on both sides).
TEST_F(Connect, TheAckTimeoutOptionSetsTheQpsTimeout) {
  listen_on(7477);
  rdma_cm_id* c = client_to(7477);
  uint8_t ct = 21, st = 17;
  ASSERT_EQ(rdma_set_option(c, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ct, sizeof(ct)), 0);
  uint32_t wrong = 3;
  errno = 0;
  EXPECT_EQ(rdma_set_option(c, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &wrong, sizeof(wrong)), -1);
  EXPECT_EQ(errno, EINVAL);
  rdma_conn_param cp{};
  cp.responder_resources = cp.initiator_depth = 1;
  cp.retry_count = cp.rnr_retry_count = 7;
  ASSERT_EQ(rdma_connect(c, &cp), 0) << strerror(errno);
  rdma_cm_event* req = expect(sch_, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  rdma_cm_id* s = req->id;
  ids_.push_back(s);
  rdma_ack_cm_event(req);
  ibv_qp_init_attr at = rc_attr();
  ASSERT_EQ(rdma_create_qp(s, nullptr, &at), 0) << strerror(errno);
  ASSERT_EQ(rdma_set_option(s, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &st, sizeof(st)), 0);
  ASSERT_EQ(rdma_accept(s, &cp), 0) << strerror(errno);
  rdma_ack_cm_event(expect(cch_, RDMA_CM_EVENT_ESTABLISHED));
  rdma_ack_cm_event(expect(sch_, RDMA_CM_EVENT_ESTABLISHED));
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  ASSERT_EQ(ibv_query_qp(c->qp, &a, IBV_QP_TIMEOUT, &ia), 0);
  EXPECT_EQ(a.timeout, ct);
  ASSERT_EQ(ibv_query_qp(s->qp, &a, IBV_QP_TIMEOUT, &ia), 0);
  EXPECT_EQ(a.timeout, st);
}

TEST_F(Connect, NoListenerIsRejectedWithInvalidServiceId) {
  rdma_cm_id* c = client_to(7472);
  rdma_conn_param cp{};
  ASSERT_EQ(rdma_connect(c, &cp), 0);
  rdma_cm_event* e = expect(cch_, RDMA_CM_EVENT_REJECTED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->status, 8);
  rdma_ack_cm_event(e);
}

TEST_F(Connect, RejectCarriesReasonAndPrivateData) {
  listen_on(7473);
  rdma_cm_id* c = client_to(7473);
  rdma_conn_param cp{};
  ASSERT_EQ(rdma_connect(c, &cp), 0);
  rdma_cm_event* req = expect(sch_, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  rdma_cm_id* s = req->id;
  ids_.push_back(s);
  rdma_ack_cm_event(req);
  const char why[] = "go away";
  ASSERT_EQ(rdma_reject(s, why, sizeof(why)), 0);
  rdma_cm_event* e = expect(cch_, RDMA_CM_EVENT_REJECTED);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->status, 28);
  EXPECT_STREQ(static_cast<const char*>(e->param.conn.private_data), why);
  rdma_ack_cm_event(e);
}

TEST_F(Connect, APortIsTakenOnce) {
  listen_on(7474);
  rdma_cm_id* again = nullptr;
  ASSERT_EQ(rdma_create_id(sch_, &again, nullptr, RDMA_PS_TCP), 0);
  ids_.push_back(again);
  auto a = lo(7474);
  EXPECT_EQ(rdma_bind_addr(again, sa(a)), -1);
  EXPECT_EQ(errno, EADDRINUSE);
  // The wildcard overlaps every address; another port space does not.
  rdma_cm_id* any = nullptr;
  ASSERT_EQ(rdma_create_id(sch_, &any, nullptr, RDMA_PS_TCP), 0);
  ids_.push_back(any);
  sockaddr_in w = lo(7474);
  w.sin_addr.s_addr = INADDR_ANY;
  EXPECT_EQ(rdma_bind_addr(any, sa(w)), -1);
  EXPECT_EQ(errno, EADDRINUSE);
  rdma_cm_id* udp = nullptr;
  ASSERT_EQ(rdma_create_id(sch_, &udp, nullptr, RDMA_PS_UDP), 0);
  ids_.push_back(udp);
  EXPECT_EQ(rdma_bind_addr(udp, sa(a)), 0) << strerror(errno);
}

// As the kernel's CM reads a loopback bind (cma_any_addr): no device, a
// listener that takes requests to every address of the host, and a port
// that overlaps every other bind of it. (libfabric's verbs provider binds
// "localhost" to find the devices' own addresses; it needs id->verbs NULL.)
TEST_F(Connect, ALoopbackBindTakesNoDeviceAndEveryAddress) {
  rdma_cm_id* l = listen_on(7478);
  EXPECT_EQ(l->verbs, nullptr);
  rdma_cm_id* other = nullptr;
  ASSERT_EQ(rdma_create_id(sch_, &other, nullptr, RDMA_PS_TCP), 0);
  ids_.push_back(other);
  sockaddr_in d0 = lo(7478);
  d0.sin_addr.s_addr = htonl(0x0a090001);  // 10.9.0.1, in_private_netns.sh's d0
  EXPECT_EQ(rdma_bind_addr(other, sa(d0)), -1);
  EXPECT_EQ(errno, EADDRINUSE);
  rdma_cm_id* c = client_to(7478, true, ntohl(d0.sin_addr.s_addr));
  rdma_conn_param cp{};
  ASSERT_EQ(rdma_connect(c, &cp), 0);
  rdma_cm_event* req = expect(sch_, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  ids_.push_back(req->id);
  EXPECT_NE(req->id->verbs, nullptr);  // the request's device
  const auto* local = reinterpret_cast<const sockaddr_in*>(rdma_get_local_addr(req->id));
  EXPECT_EQ(local->sin_addr.s_addr, d0.sin_addr.s_addr);
  rdma_ack_cm_event(req);
}

// A listener's program that never answers a request: the client gives up
// as one whose REQ on the wire got no answer (UNREACHABLE, -ETIMEDOUT,
// after UROCE_CM_RETRIES + 1 response timeouts: this test's environment
// makes that ~1.8 s), and the listener's id hears the request timed out.
TEST_F(Connect, AListenerThatNeverAnswersEndsInUnreachable) {
  listen_on(7479);
  rdma_cm_id* c = client_to(7479);
  rdma_conn_param cp{};
  ASSERT_EQ(rdma_connect(c, &cp), 0);
  rdma_cm_event* req = expect(sch_, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  rdma_cm_id* s = req->id;
  ids_.push_back(s);
  rdma_ack_cm_event(req);
  rdma_cm_event* e = next_event(cch_, 20000);
  ASSERT_NE(e, nullptr) << "the connect never ended";
  EXPECT_EQ(e->event, RDMA_CM_EVENT_UNREACHABLE) << rdma_event_str(e->event);
  EXPECT_EQ(e->status, -ETIMEDOUT);
  rdma_ack_cm_event(e);
  rdma_cm_event* r = expect(sch_, RDMA_CM_EVENT_REJECTED);
  if (r) {
    EXPECT_EQ(r->id, s);
    rdma_ack_cm_event(r);
  }
}

TEST_F(Connect, AProgramThatMovesItsOwnQp) {
  listen_on(7475);
  rdma_cm_id* c = client_to(7475, /*qp=*/false);
  // The program's own QP, on the device the CM chose.
  ibv_pd* pd = ibv_alloc_pd(c->verbs);
  ibv_cq* cq = ibv_create_cq(c->verbs, 8, nullptr, nullptr, 0);
  ASSERT_TRUE(pd && cq);
  ibv_qp_init_attr at = rc_attr();
  at.send_cq = at.recv_cq = cq;
  ibv_qp* qp = ibv_create_qp(pd, &at);
  ASSERT_NE(qp, nullptr);
  ibv_qp_attr qa{};
  int mask = 0;
  qa.qp_state = IBV_QPS_INIT;
  ASSERT_EQ(rdma_init_qp_attr(c, &qa, &mask), 0);
  ASSERT_EQ(ibv_modify_qp(qp, &qa, mask), 0);
  rdma_conn_param cp{};
  cp.qp_num = qp->qp_num;
  cp.retry_count = 7;
  ASSERT_EQ(rdma_connect(c, &cp), 0) << strerror(errno);

  rdma_cm_event* req = expect(sch_, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  rdma_cm_id* s = req->id;
  ids_.push_back(s);
  EXPECT_EQ(req->param.conn.qp_num, qp->qp_num);
  rdma_ack_cm_event(req);
  ibv_qp_init_attr sat = rc_attr();
  ASSERT_EQ(rdma_create_qp(s, nullptr, &sat), 0);
  rdma_conn_param ap{};
  ASSERT_EQ(rdma_accept(s, &ap), 0) << strerror(errno);

  rdma_cm_event* resp = expect(cch_, RDMA_CM_EVENT_CONNECT_RESPONSE);
  ASSERT_NE(resp, nullptr);
  EXPECT_EQ(resp->param.conn.qp_num, s->qp->qp_num);
  rdma_ack_cm_event(resp);
  for (ibv_qp_state st : {IBV_QPS_RTR, IBV_QPS_RTS}) {
    qa = {};
    qa.qp_state = st;
    ASSERT_EQ(rdma_init_qp_attr(c, &qa, &mask), 0) << st;
    ASSERT_EQ(ibv_modify_qp(qp, &qa, mask), 0) << st;
  }
  ibv_qp_attr got{};
  ibv_qp_init_attr gi{};
  ASSERT_EQ(ibv_query_qp(qp, &got, IBV_QP_STATE | IBV_QP_DEST_QPN, &gi), 0);
  EXPECT_EQ(got.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(got.dest_qp_num, s->qp->qp_num);
  ASSERT_EQ(rdma_establish(c), 0) << strerror(errno);
  rdma_ack_cm_event(expect(sch_, RDMA_CM_EVENT_ESTABLISHED));

  ASSERT_EQ(rdma_disconnect(s), 0);
  rdma_ack_cm_event(expect(sch_, RDMA_CM_EVENT_DISCONNECTED));
  rdma_ack_cm_event(expect(cch_, RDMA_CM_EVENT_DISCONNECTED));
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
}

// A process that dies connected: its peer is told, as the kernel's CM
// tells it when the dead process's ids are destroyed.
TEST_F(Connect, ThePeersProcessDyingDisconnects) {
  listen_on(7476);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(20);
    rdma_event_channel* ch = rdma_create_event_channel();
    rdma_cm_id* c = nullptr;
    auto a = lo(7476);
    ibv_qp_init_attr at = rc_attr();
    rdma_conn_param cp{};
    rdma_cm_event* e = nullptr;
    if (!ch || rdma_create_id(ch, &c, nullptr, RDMA_PS_TCP) || rdma_resolve_addr(c, nullptr, sa(a), 1000) ||
        rdma_get_cm_event(ch, &e) || rdma_ack_cm_event(e) || rdma_resolve_route(c, 1000) ||
        rdma_get_cm_event(ch, &e) || rdma_ack_cm_event(e) || rdma_create_qp(c, nullptr, &at) ||
        rdma_connect(c, &cp) || rdma_get_cm_event(ch, &e) || e->event != RDMA_CM_EVENT_ESTABLISHED)
      _exit(3);
    char x = 1;
    (void)!write(ready[1], &x, 1);
    _exit(0);  // no disconnect, no destroy
  }
  rdma_cm_event* req = expect(sch_, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  rdma_cm_id* s = req->id;
  ids_.push_back(s);
  rdma_ack_cm_event(req);
  ibv_qp_init_attr at = rc_attr();
  ASSERT_EQ(rdma_create_qp(s, nullptr, &at), 0);
  rdma_conn_param ap{};
  ASSERT_EQ(rdma_accept(s, &ap), 0);
  rdma_ack_cm_event(expect(sch_, RDMA_CM_EVENT_ESTABLISHED));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  rdma_ack_cm_event(expect(sch_, RDMA_CM_EVENT_DISCONNECTED));
  close(ready[0]);
  close(ready[1]);
}

// UD ids: the request reaches the listener, the answer gives the client
// what it needs to send to the server's QP, and a datagram arrives.
TEST_F(Connect, SidrGivesTheClientTheServersQp) {
  rdma_cm_id* l = nullptr;
  ASSERT_EQ(rdma_create_id(sch_, &l, nullptr, RDMA_PS_UDP), 0);
  ids_.push_back(l);
  auto a = lo(7477);
  ASSERT_EQ(rdma_bind_addr(l, sa(a)), 0);
  ASSERT_EQ(rdma_listen(l, 4), 0);
  rdma_cm_id* c = nullptr;
  ASSERT_EQ(rdma_create_id(cch_, &c, nullptr, RDMA_PS_UDP), 0);
  ids_.push_back(c);
  ASSERT_EQ(rdma_resolve_addr(c, nullptr, sa(a), 1000), 0);
  rdma_ack_cm_event(expect(cch_, RDMA_CM_EVENT_ADDR_RESOLVED));
  ASSERT_EQ(rdma_resolve_route(c, 1000), 0);
  rdma_ack_cm_event(expect(cch_, RDMA_CM_EVENT_ROUTE_RESOLVED));
  ibv_qp_init_attr at = rc_attr();
  at.qp_type = IBV_QPT_UD;
  ASSERT_EQ(rdma_create_qp(c, nullptr, &at), 0);
  const char hi[] = "sidr";
  rdma_conn_param cp{};
  cp.private_data = hi;
  cp.private_data_len = sizeof(hi);
  ASSERT_EQ(rdma_connect(c, &cp), 0) << strerror(errno);

  rdma_cm_event* req = expect(sch_, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  rdma_cm_id* s = req->id;
  ids_.push_back(s);
  EXPECT_EQ(req->param.ud.private_data_len, 180);
  EXPECT_STREQ(static_cast<const char*>(req->param.ud.private_data), hi);
  rdma_ack_cm_event(req);
  ibv_qp_init_attr sat = rc_attr();
  sat.qp_type = IBV_QPT_UD;
  ASSERT_EQ(rdma_create_qp(s, nullptr, &sat), 0);
  ASSERT_EQ(rdma_accept(s, nullptr), 0) << strerror(errno);

  rdma_cm_event* est = expect(cch_, RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_NE(est, nullptr);
  EXPECT_EQ(est->param.ud.qp_num, s->qp->qp_num);
  EXPECT_EQ(est->param.ud.qkey, 0x01234567u);
  ibv_ah* ah = ibv_create_ah(c->qp->pd, &est->param.ud.ah_attr);
  ASSERT_NE(ah, nullptr) << strerror(errno);
  const uint32_t qpn = est->param.ud.qp_num, qkey = est->param.ud.qkey;
  rdma_ack_cm_event(est);

  std::vector<char> sbuf(32, 'u'), rbuf(32 + 40, 0);
  const UdDest ud{ah, qpn, qkey};
  ibv_wc wc{};
  ASSERT_NO_FATAL_FAILURE(send_one(c, s, sbuf, rbuf, &wc, &ud));
  EXPECT_EQ(wc.src_qp, c->qp->qp_num);
  EXPECT_EQ(memcmp(rbuf.data() + 40, sbuf.data(), sbuf.size()), 0);
  ibv_destroy_ah(ah);
}

TEST_F(Connect, SidrWithoutListenerIsUnreachable) {
  rdma_cm_id* c = nullptr;
  ASSERT_EQ(rdma_create_id(cch_, &c, nullptr, RDMA_PS_UDP), 0);
  ids_.push_back(c);
  auto a = lo(7478);
  ASSERT_EQ(rdma_resolve_addr(c, nullptr, sa(a), 1000), 0);
  rdma_ack_cm_event(expect(cch_, RDMA_CM_EVENT_ADDR_RESOLVED));
  ASSERT_EQ(rdma_resolve_route(c, 1000), 0);
  rdma_ack_cm_event(expect(cch_, RDMA_CM_EVENT_ROUTE_RESOLVED));
  ibv_qp_init_attr at = rc_attr();
  at.qp_type = IBV_QPT_UD;
  ASSERT_EQ(rdma_create_qp(c, nullptr, &at), 0);
  rdma_conn_param cp{};
  ASSERT_EQ(rdma_connect(c, &cp), 0);
  rdma_cm_event* e = expect(cch_, RDMA_CM_EVENT_UNREACHABLE);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->status, 1);  // the SIDR REP's status "service ID not supported", as the kernel reports it
  rdma_ack_cm_event(e);
}

}  // namespace
