// Raw Ethernet QPs and flow steering through the verbs, as perftest's
// raw_ethernet_* tools and rdma-core's test_flow/test_rss_traffic use them:
// frames one RAW_PACKET QP sends reach the QPs of the same device whose
// rules claim them (what a NIC loops back), with the kernel's errno for
// each malformed rule. The process runs as root in CI (CAP_NET_RAW); the
// test that drops the capability forks.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include "raw_fixture.h"

namespace uroce::fault {
namespace {

using namespace raw;

TEST_F(RawEthernet, AFrameARuleClaimsArrivesWholeAndOthersDoNot) {
  ASSERT_TRUE(srv_->make(ctx_, pd_));
  ASSERT_TRUE(cli_->make(ctx_, pd_));
  Rule r;
  r.dst_mac(kSrvMac).udp_dport(5001);
  ibv_flow* f = ibv_create_flow(srv_->qp, r.attr());
  ASSERT_NE(f, nullptr) << strerror(errno);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(srv_->recv(100 + i, size_t(i) * 2048), 0);
  ASSERT_EQ(cli_->recv(7), 0);  // the sender never gets its own frame back
  const auto hit = udp_frame(kSrvMac, kCliMac, 4000, 5001, 1000);
  const auto other_port = udp_frame(kSrvMac, kCliMac, 4000, 5002, 300);
  const auto other_mac = udp_frame(kCliMac, kSrvMac, 4000, 5001, 300);
  ASSERT_EQ(cli_->send(1, other_port), 0);
  ASSERT_EQ(cli_->send(2, other_mac), 0);
  ASSERT_EQ(cli_->send(3, hit), 0);
  auto sent = poll_n(cli_->cq, 3);
  ASSERT_EQ(sent.size(), 3u);
  for (const ibv_wc& wc : sent) {
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.opcode, IBV_WC_SEND);
  }
  auto got = poll_one(srv_->cq);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, IBV_WC_SUCCESS);
  EXPECT_EQ(got->opcode, IBV_WC_RECV);
  EXPECT_EQ(got->wr_id, 100u);
  EXPECT_EQ(got->byte_len, hit.size()) << "the frame from its Ethernet header, without FCS";
  EXPECT_EQ(memcmp(srv_->buf.data(), hit.data(), hit.size()), 0);
  EXPECT_TRUE(poll_for(srv_->cq, 50).empty()) << "frames no rule claims stay out";
  EXPECT_EQ(ibv_destroy_qp(srv_->qp), EBUSY) << "a rule still names the QP";
  EXPECT_EQ(ibv_destroy_flow(f), 0);
  ASSERT_EQ(cli_->send(4, hit), 0);
  ASSERT_TRUE(poll_one(cli_->cq));
  EXPECT_TRUE(poll_for(srv_->cq, 50).empty()) << "the rule is gone";
}

TEST_F(RawEthernet, AFrameWakesTheReceiversCompletionChannel) {
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx_);
  ASSERT_NE(ch, nullptr);
  ibv_cq* cq = ibv_create_cq(ctx_, 16, nullptr, ch, 0);
  ASSERT_NE(cq, nullptr);
  RawQp srv;
  srv.cq = cq;  // made here, on the channel
  srv.mr = ibv_reg_mr(pd_, srv.buf.data(), srv.buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_qp_init_attr a{};
  a.send_cq = a.recv_cq = cq;
  a.qp_type = IBV_QPT_RAW_PACKET;
  a.cap = {4, 4, 1, 1, 0};
  srv.qp = ibv_create_qp(pd_, &a);
  ASSERT_NE(srv.qp, nullptr);
  ibv_qp_attr m{};
  m.qp_state = IBV_QPS_INIT;
  m.port_num = 1;
  ASSERT_EQ(ibv_modify_qp(srv.qp, &m, IBV_QP_STATE | IBV_QP_PORT), 0);
  m.qp_state = IBV_QPS_RTR;
  ASSERT_EQ(ibv_modify_qp(srv.qp, &m, IBV_QP_STATE), 0);
  ASSERT_TRUE(cli_->make(ctx_, pd_));
  Rule r;
  r.dst_mac(kSrvMac);
  ibv_flow* f = ibv_create_flow(srv.qp, r.attr());
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(srv.recv(1), 0);
  ASSERT_EQ(ibv_req_notify_cq(cq, 0), 0);
  ASSERT_EQ(cli_->send(1, udp_frame(kSrvMac, kCliMac, 1, 2, 100)), 0);
  pollfd p{ch->fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 2000), 1) << "no completion event";
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  ASSERT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
  EXPECT_EQ(ev_cq, cq);
  ibv_ack_cq_events(cq, 1);
  auto wc = poll_one(cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->opcode, IBV_WC_RECV);
  EXPECT_EQ(ibv_destroy_flow(f), 0);
  ibv_destroy_qp(srv.qp);
  srv.qp = nullptr;
  ibv_destroy_cq(cq);
  srv.cq = nullptr;
  ibv_destroy_comp_channel(ch);
}

TEST_F(RawEthernet, PriorityDontTrapAndDefaultRules) {
  RawQp third;
  ASSERT_TRUE(srv_->make(ctx_, pd_));
  ASSERT_TRUE(cli_->make(ctx_, pd_));
  ASSERT_TRUE(third.make(ctx_, pd_));
  // srv: priority 1 on the MAC; third: priority 0 on the port, DONT_TRAP,
  // so srv sees the frame too; cli: ALL_DEFAULT (what no rule claims).
  Rule mac(IBV_FLOW_ATTR_NORMAL, 1);
  mac.dst_mac(kSrvMac);
  Rule port(IBV_FLOW_ATTR_NORMAL, 0, IBV_FLOW_ATTR_FLAGS_DONT_TRAP);
  port.udp_dport(6000);
  Rule all(IBV_FLOW_ATTR_ALL_DEFAULT);
  ibv_flow* f1 = ibv_create_flow(srv_->qp, mac.attr());
  ibv_flow* f2 = ibv_create_flow(third.qp, port.attr());
  ibv_flow* f3 = ibv_create_flow(cli_->qp, all.attr());
  ASSERT_TRUE(f1 && f2 && f3) << strerror(errno);
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(srv_->recv(10 + i, size_t(i) * 2048), 0);
    ASSERT_EQ(third.recv(20 + i, size_t(i) * 2048), 0);
    ASSERT_EQ(cli_->recv(30 + i, size_t(i) * 2048), 0);
  }
  // From `third`: to srv's MAC on port 6000 (third is the sender: only srv).
  ASSERT_EQ(third.send(1, udp_frame(kSrvMac, kCliMac, 1, 6000, 200)), 0);
  // From cli: port 6000 to another MAC (third, DONT_TRAP: not claimed, so
  // ALL_DEFAULT's cli would get it, but cli sent it).
  ASSERT_EQ(cli_->send(2, udp_frame(kCliMac, kSrvMac, 1, 6000, 200)), 0);
  // From srv: port 6000 to srv's MAC: third (priority 0, DONT_TRAP) and
  // srv (priority 1) would both match; srv sent it, so third only.
  ASSERT_EQ(srv_->send(3, udp_frame(kSrvMac, kCliMac, 1, 6000, 200)), 0);
  // From third: nothing matches a NORMAL rule: ALL_DEFAULT's cli gets it.
  ASSERT_EQ(third.send(4, udp_frame(kCliMac, kSrvMac, 1, 7000, 200)), 0);
  EXPECT_EQ(poll_n(srv_->cq, 2).size(), 2u);  // srv: frame 1 recv + send 3 completion
  auto t = poll_n(third.cq, 4);               // third: 2 sends + frames 2, 3
  EXPECT_EQ(t.size(), 4u);
  auto c = poll_n(cli_->cq, 2);  // cli: send 2 + frame 4
  EXPECT_EQ(c.size(), 2u);
  int third_recvs = 0, cli_recvs = 0;
  for (const ibv_wc& wc : t) third_recvs += wc.opcode == IBV_WC_RECV;
  for (const ibv_wc& wc : c) cli_recvs += wc.opcode == IBV_WC_RECV;
  EXPECT_EQ(third_recvs, 2);
  EXPECT_EQ(cli_recvs, 1);
  EXPECT_TRUE(poll_for(srv_->cq, 30).empty());
  EXPECT_EQ(ibv_destroy_flow(f1), 0);
  EXPECT_EQ(ibv_destroy_flow(f2), 0);
  EXPECT_EQ(ibv_destroy_flow(f3), 0);
}

TEST_F(RawEthernet, SnifferSeesEverythingAndAnEmptyQueueDropsTheFrame) {
  ASSERT_TRUE(srv_->make(ctx_, pd_));
  ASSERT_TRUE(cli_->make(ctx_, pd_));
  Rule sniff(IBV_FLOW_ATTR_SNIFFER);
  ibv_flow* f = ibv_create_flow(srv_->qp, sniff.attr());
  ASSERT_NE(f, nullptr) << strerror(errno);
  // No receive posted yet: the frame is dropped, never queued.
  ASSERT_EQ(cli_->send(1, udp_frame(kCliMac, kSrvMac, 1, 2, 100)), 0);
  ASSERT_TRUE(poll_one(cli_->cq));
  ASSERT_EQ(srv_->recv(1), 0);
  EXPECT_TRUE(poll_for(srv_->cq, 30).empty());
  ASSERT_EQ(cli_->send(2, udp_frame(kCliMac, kSrvMac, 1, 2, 120)), 0);
  ASSERT_TRUE(poll_one(cli_->cq));
  auto got = poll_one(srv_->cq);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->byte_len, 120u);
  // Counted where an operator sees them (`uroce stat --qp`).
  ASSERT_NE(getenv("UROCE_TOOL"), nullptr) << "set by CTest";
  EXPECT_EQ(qp_counter(srv_->qp->qp_num, "raw.dropped"), 1);
  EXPECT_EQ(qp_counter(srv_->qp->qp_num, "raw.received"), 1);
  EXPECT_EQ(qp_counter(srv_->qp->qp_num, "raw.received_bytes"), 120);
  EXPECT_EQ(qp_counter(cli_->qp->qp_num, "raw.sent"), 2);
  EXPECT_EQ(qp_counter(cli_->qp->qp_num, "raw.sent_bytes"), 220);
  EXPECT_EQ(ibv_destroy_flow(f), 0);
}

TEST_F(RawEthernet, AFrameLongerThanThePortAllowsIsALengthError) {
  ASSERT_TRUE(cli_->make(ctx_, pd_));
  ibv_port_attr pa{};
  ASSERT_EQ(ibv_query_port(ctx_, 1, &pa), 0);
  EXPECT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
  // The interface's MTU plus an Ethernet header and one VLAN tag fits; one
  // byte more does not. (lo's MTU is 64 KiB.)
  const size_t mtu = ctx_mtu();
  ASSERT_GT(mtu, 0u);
  ASSERT_EQ(cli_->send(1, std::vector<uint8_t>(mtu + 18, 0xab), 0), 0);
  auto wc = poll_one(cli_->cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc->byte_len, mtu + 18);
  ASSERT_EQ(cli_->send(2, std::vector<uint8_t>(mtu + 19, 0xab), 0), 0);
  wc = poll_one(cli_->cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_LOC_LEN_ERR) << "never truncated";
  EXPECT_EQ(query_state(cli_->qp), IBV_QPS_ERR);
}

TEST_F(RawEthernet, AFrameShorterThanAnEthernetHeaderIsALengthError) {
  ASSERT_TRUE(cli_->make(ctx_, pd_));
  ASSERT_EQ(cli_->send(1, std::vector<uint8_t>(10, 0)), 0);
  auto wc = poll_one(cli_->cq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_LOC_LEN_ERR);
}

TEST_F(RawEthernet, MalformedRulesGetTheKernelsErrno) {
  ASSERT_TRUE(srv_->make(ctx_, pd_));
  auto expect = [&](Rule& r, int err, const char* what) {
    errno = 0;
    ibv_flow* f = ibv_create_flow(srv_->qp, r.attr());
    EXPECT_EQ(f, nullptr) << what;
    EXPECT_EQ(errno, err) << what;
    if (f) ibv_destroy_flow(f);
  };
  Rule dont_trap_default(IBV_FLOW_ATTR_ALL_DEFAULT, 0, IBV_FLOW_ATTR_FLAGS_DONT_TRAP);
  expect(dont_trap_default, EINVAL, "DONT_TRAP on a default rule");
  Rule reserved_flag(IBV_FLOW_ATTR_NORMAL, 0, 1u << 5);
  expect(reserved_flag, EINVAL, "a reserved flag");
  Rule eleven;
  for (int i = 0; i < 11; ++i) eleven.dst_mac(kSrvMac);
  expect(eleven, EINVAL, "more than ten specs");
  Rule unknown;
  ibv_flow_spec_eth e{};
  e.type = ibv_flow_spec_type(0x77);
  e.size = sizeof(e);
  unknown.add(e);
  expect(unknown, EINVAL, "an unknown spec type");
  Rule short_spec;
  e.type = IBV_FLOW_SPEC_ETH;
  e.size = 8;
  short_spec.add(e);
  expect(short_spec, EINVAL, "a spec shorter than its type");
  Rule port2;
  port2.attr()->port = 2;
  expect(port2, EINVAL, "no port 2");
  Rule sniff_specs(IBV_FLOW_ATTR_SNIFFER);
  sniff_specs.dst_mac(kSrvMac);
  expect(sniff_specs, EINVAL, "a sniffer rule with specs");
  // A rule on an RC QP: EINVAL, as the kernel answers.
  RcPair rc;
  ASSERT_TRUE(make_rc_pair(ctx_, &rc));
  Rule ok;
  ok.dst_mac(kSrvMac);
  errno = 0;
  EXPECT_EQ(ibv_create_flow(rc.a.qp, ok.attr()), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

/// In a forked child: asks for a raw QP on a context of its own; 0 if it
/// is refused with EPERM, 3 if the device does not open, 4 if the QP is
/// made, 5 for another errno (the child's exit status).
int raw_qp_refused() {
  ibv_context* ctx = open_lo();
  if (!ctx) return 3;
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
  ibv_qp_init_attr a{};
  a.send_cq = a.recv_cq = cq;
  a.qp_type = IBV_QPT_RAW_PACKET;
  a.cap = {1, 1, 1, 1, 0};
  errno = 0;
  ibv_qp* qp = ibv_create_qp(pd, &a);
  const int code = qp ? 4 : errno == EPERM ? 0 : 5;
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  return code;
}

// Not RawEthernet's fixture: this case runs without CAP_NET_RAW too
// (raw_setcap.sh runs it so, beside a program that has it from setcap).
class RawPrivilege : public VerbsTest {};

TEST_F(RawPrivilege, WithoutCapNetRawNoRawQpIsMade) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A process without CAP_NET_RAW in its effective set (its own context).
    if (!drop_net_raw()) _exit(2);
    _exit(raw_qp_refused());
  }
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "2: capset, 3: open, 4: made a QP, 5: another errno";
}

// CAP_NET_RAW counts in the user namespace the device's daemon serves, as
// the kernel's capable() counts it in the initial one: a process that made
// a user namespace of its own holds every capability there (its CapEff is
// full), and still may not have a raw QP.
TEST_F(RawEthernet, CapNetRawInAUserNamespaceOfItsOwnIsNotEnough) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const uid_t uid = getuid();
    if (unshare(CLONE_NEWUSER) != 0) _exit(6);
    // The same user (0 -> this process's uid), so uroced still serves it.
    char map[32];
    const int n = snprintf(map, sizeof(map), "0 %u 1", unsigned(uid));
    const int fd = open("/proc/self/uid_map", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, map, size_t(n)) != n) _exit(7);
    close(fd);
    if (!has_net_raw()) _exit(8);
    _exit(raw_qp_refused());
  }
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st));
  if (WEXITSTATUS(st) == 6) GTEST_SKIP() << "user namespaces not allowed here";
  EXPECT_EQ(WEXITSTATUS(st), 0) << "7: uid_map, 8: no CapEff, 3: open, 4: made a QP, 5: another errno";
}

TEST_F(RawEthernet, WorkQueuesSpreadFramesByTheirHash) {
  ASSERT_TRUE(cli_->make(ctx_, pd_));
  ibv_cq* cq = ibv_create_cq(ctx_, 256, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  std::vector<uint8_t> buf(4 * 2048);
  ibv_mr* mr = ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ibv_wq* wqs[4];
  for (ibv_wq*& w : wqs) {
    ibv_wq_init_attr wa{};
    wa.wq_type = IBV_WQT_RQ;
    wa.max_wr = 64;
    wa.max_sge = 1;
    wa.pd = pd_;
    wa.cq = cq;
    w = ibv_create_wq(ctx_, &wa);
    ASSERT_NE(w, nullptr) << strerror(errno);
    ibv_wq_attr m{};
    m.attr_mask = IBV_WQ_ATTR_STATE;
    m.wq_state = IBV_WQS_RDY;
    ASSERT_EQ(ibv_modify_wq(w, &m), 0);
    for (int i = 0; i < 32; ++i) {
      ibv_sge s{reinterpret_cast<uint64_t>(buf.data()), 2048, mr->lkey};
      ibv_recv_wr wr{};
      wr.wr_id = w->wq_num;
      wr.sg_list = &s;
      wr.num_sge = 1;
      ibv_recv_wr* bad = nullptr;
      ASSERT_EQ(ibv_post_wq_recv(w, &wr, &bad), 0);
    }
  }
  ibv_rwq_ind_table_init_attr ta{};
  ta.log_ind_tbl_size = 2;
  ta.ind_tbl = wqs;
  ibv_rwq_ind_table* table = ibv_create_rwq_ind_table(ctx_, &ta);
  ASSERT_NE(table, nullptr);
  uint8_t key[40];
  for (int i = 0; i < 40; ++i) key[i] = uint8_t(i * 37 + 11);
  ibv_qp_init_attr_ex qa{};
  qa.qp_type = IBV_QPT_RAW_PACKET;
  qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
  qa.pd = pd_;
  qa.rwq_ind_tbl = table;
  qa.rx_hash_conf.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
  qa.rx_hash_conf.rx_hash_key_len = 40;
  qa.rx_hash_conf.rx_hash_key = key;
  qa.rx_hash_conf.rx_hash_fields_mask = IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4;
  ibv_qp* rss = ibv_create_qp_ex(ctx_, &qa);
  ASSERT_NE(rss, nullptr) << strerror(errno);
  Rule r;
  r.dst_mac(kSrvMac);
  ibv_flow* f = ibv_create_flow(rss, r.attr());
  ASSERT_NE(f, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_destroy_rwq_ind_table(table), EBUSY) << "an RSS QP uses it";
  EXPECT_EQ(ibv_destroy_wq(wqs[0]), EBUSY) << "a table names it";
  for (uint32_t i = 0; i < 64; ++i) {
    ASSERT_EQ(cli_->send(i, udp_frame(kSrvMac, kCliMac, 1, 2, 100, 0x0a000000 + i * 7919)), 0);
    ASSERT_TRUE(poll_one(cli_->cq));
  }
  auto got = poll_n(cq, 64);
  ASSERT_EQ(got.size(), 64u);
  int per[4] = {};
  for (const ibv_wc& wc : got) {
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    for (int i = 0; i < 4; ++i) per[i] += wc.wr_id == wqs[i]->wq_num;
  }
  for (int i = 0; i < 4; ++i) EXPECT_GT(per[i], 0) << "work queue " << i << " got nothing of 64 sources";
  EXPECT_EQ(ibv_destroy_flow(f), 0);
  EXPECT_EQ(ibv_destroy_qp(rss), 0);
  EXPECT_EQ(ibv_destroy_rwq_ind_table(table), 0);
  for (ibv_wq* w : wqs) EXPECT_EQ(ibv_destroy_wq(w), 0);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
}

}  // namespace
}  // namespace uroce::fault
