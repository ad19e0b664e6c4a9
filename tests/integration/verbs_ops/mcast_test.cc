// UD multicast (ibv_attach_mcast / ibv_detach_mcast) over the network link:
// a datagram sent to a group's GID with QPN 0xFFFFFF reaches every QP
// attached to the group — in this process and in another one — with the
// group as the GRH's destination; a detached QP gets nothing more. Run with
// UROCE_LINK=udp (the variant in tests.cmake); on the shared-memory link
// alone attaching is refused with EOPNOTSUPP, which the plain run checks.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cstdlib>
#include <cstring>

#include "support/verbs_harness.h"

namespace uroce::test {
namespace {

constexpr uint32_t kGrh = 40;
constexpr uint32_t kMcastQpn = 0xffffff;
constexpr size_t kBuf = 8192;

bool over_udp() {
  const char* e = getenv("UROCE_LINK");
  return e && !strcmp(e, "udp");
}

/// ::ffff:239.1.2.<last>
ibv_gid group_gid(uint8_t last) {
  ibv_gid g{};
  g.raw[10] = g.raw[11] = 0xff;
  g.raw[12] = 239;
  g.raw[13] = 1;
  g.raw[14] = 2;
  g.raw[15] = last;
  return g;
}

/// A UD QP in RTS with its CQ and a registered buffer (members in
/// destruction order: the buffer outlives its registration).
struct UdQp {
  std::vector<uint8_t> buf = std::vector<uint8_t>(kBuf);
  CqPtr cq;
  QpPtr qp;
  MrPtr mr;

  bool open(Device& d, std::string* err) {
    cq.reset(ibv_create_cq(d.ctx.get(), 64, nullptr, nullptr, 0));
    if (!cq) return *err = "ibv_create_cq", false;
    qp.reset(create_qp(d.pd.get(), IBV_QPT_UD, cq.get(), cq.get(), nullptr, QpCaps{}));
    if (!qp) return *err = "create_qp", false;
    mr.reset(ibv_reg_mr(d.pd.get(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE));
    if (!mr) return *err = "ibv_reg_mr", false;
    return connect_qp(qp.get(), IBV_QPT_UD, WireInfo{}, kQkey, err);
  }
  int post_recv(uint64_t wr_id, uint32_t off) {
    ibv_sge s{reinterpret_cast<uint64_t>(buf.data() + off), kGrh + 1024, mr->lkey};
    ibv_recv_wr w{}, *bad = nullptr;
    w.wr_id = wr_id;
    w.sg_list = &s;
    w.num_sge = 1;
    return ibv_post_recv(qp.get(), &w, &bad);
  }
  int send(ibv_ah* ah, uint32_t seed, uint32_t len) {
    fill_pattern(buf.data() + 4096, len, seed);
    ibv_sge s{reinterpret_cast<uint64_t>(buf.data() + 4096), len, mr->lkey};
    ibv_send_wr w{}, *bad = nullptr;
    w.wr_id = seed;
    w.opcode = IBV_WR_SEND_WITH_IMM;
    w.imm_data = imm_be(seed);
    w.send_flags = IBV_SEND_SIGNALED;
    w.sg_list = &s;
    w.num_sge = 1;
    w.wr.ud.ah = ah;
    w.wr.ud.remote_qpn = kMcastQpn;
    w.wr.ud.remote_qkey = kQkey;
    return ibv_post_send(qp.get(), &w, &bad);
  }
};

/// What a receiver checks of one multicast datagram at `off` of its buffer.
std::string check_recv(const ibv_wc& wc, const uint8_t* at, uint32_t seed, uint32_t len, uint32_t src_qpn,
                       const ibv_gid& group) {
  if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV) return "completion " + wc_str(wc);
  if (wc.byte_len != kGrh + len) return "byte_len " + std::to_string(wc.byte_len);
  if (!(wc.wc_flags & IBV_WC_GRH) || !(wc.wc_flags & IBV_WC_WITH_IMM) || wc.imm_data != imm_be(seed))
    return "flags or immediate " + wc_str(wc);
  if (wc.src_qp != src_qpn) return "src_qp " + std::to_string(wc.src_qp);
  // RoCE v2 over IPv4: the GRH's last 20 bytes are the IPv4 header; its
  // destination address (bytes 16..19 of it) is the group's.
  if (memcmp(at + 20 + 16, group.raw + 12, 4) != 0) return "GRH destination is not the group";
  if (find_pattern_mismatch(at + kGrh, len, seed) >= 0) return "payload differs";
  return "";
}

class McastTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    ASSERT_TRUE(open_device(&dev_, &err)) << err;
  }
  Device dev_;
};

TEST_F(McastTest, AttachIsCheckedAndRefusedWithoutTheNetwork) {
  std::string err;
  UdQp ud;
  ASSERT_TRUE(ud.open(dev_, &err)) << err;
  ibv_gid unicast{};
  memcpy(unicast.raw, dev_.gid.raw, 16);
  EXPECT_EQ(ibv_attach_mcast(ud.qp.get(), &unicast, 0), EINVAL);
  const ibv_gid g = group_gid(1);
  ibv_device_attr da{};
  ASSERT_EQ(ibv_query_device(dev_.ctx.get(), &da), 0);
  if (!over_udp()) {
    EXPECT_EQ(da.max_mcast_grp, 0) << "the device says it has multicast";
    EXPECT_EQ(ibv_attach_mcast(ud.qp.get(), &g, 0), EOPNOTSUPP);
    return;
  }
  EXPECT_GT(da.max_mcast_grp, 0);
  EXPECT_GT(da.max_mcast_qp_attach, 0);
  EXPECT_EQ(ibv_detach_mcast(ud.qp.get(), &g, 0), EINVAL);  // not attached
  ASSERT_EQ(ibv_attach_mcast(ud.qp.get(), &g, 0), 0);
  EXPECT_EQ(ibv_attach_mcast(ud.qp.get(), &g, 0), 0);  // twice: no error
  EXPECT_EQ(ibv_destroy_qp(ud.qp.get()), EBUSY);       // attached QPs stay
  EXPECT_EQ(ibv_detach_mcast(ud.qp.get(), &g, 0), 0);
  EXPECT_EQ(ibv_detach_mcast(ud.qp.get(), &g, 0), EINVAL);
  // Only UD QPs join groups.
  CqPtr cq(ibv_create_cq(dev_.ctx.get(), 4, nullptr, nullptr, 0));
  QpPtr rc(create_qp(dev_.pd.get(), IBV_QPT_RC, cq.get(), cq.get(), nullptr, QpCaps{}));
  ASSERT_TRUE(rc);
  EXPECT_EQ(ibv_attach_mcast(rc.get(), &g, 0), EINVAL);
}

TEST_F(McastTest, EveryAttachedQpGetsEachDatagramUntilItDetaches) {
  if (!over_udp()) GTEST_SKIP() << "multicast needs the network link (UROCE_LINK=udp on this device)";
  std::string err;
  const ibv_gid g = group_gid(7);
  // Another process with one member of the group.
  auto child = PeerProcess::spawn([g](Channel& ch) {
    Device d;
    std::string e;
    CHILD_CHECK(open_device(&d, &e), e);
    UdQp m;
    CHILD_CHECK(m.open(d, &e), e);
    CHILD_CHECK(ibv_attach_mcast(m.qp.get(), &g, 0) == 0, "attach");
    CHILD_CHECK(m.post_recv(1, 0) == 0, "post_recv");
    CHILD_CHECK(ch.send_pod(uint32_t(1)), "ready");
    auto wc = poll_one(m.cq.get());
    CHILD_CHECK(wc.has_value(), "no datagram");
    uint32_t src = 0;
    CHILD_CHECK(ch.recv_pod(&src), "src qpn");
    const std::string why = check_recv(*wc, m.buf.data(), 77, 1000, src, g);
    CHILD_CHECK(why.empty(), why);
    CHILD_CHECK(ibv_detach_mcast(m.qp.get(), &g, 0) == 0, "detach");
    return 0;
  });
  ASSERT_TRUE(child);
  UdQp sender, a, b;
  ASSERT_TRUE(sender.open(dev_, &err)) << err;
  ASSERT_TRUE(a.open(dev_, &err)) << err;
  ASSERT_TRUE(b.open(dev_, &err)) << err;
  ASSERT_EQ(ibv_attach_mcast(a.qp.get(), &g, 0), 0);
  ASSERT_EQ(ibv_attach_mcast(b.qp.get(), &g, 0), 0);
  ASSERT_EQ(a.post_recv(1, 0), 0);
  ASSERT_EQ(a.post_recv(2, 2048), 0);
  ASSERT_EQ(b.post_recv(1, 0), 0);
  ASSERT_EQ(b.post_recv(2, 2048), 0);
  uint32_t ready = 0;
  ASSERT_TRUE(child->chan().recv_pod(&ready)) << child->chan().error();
  ASSERT_TRUE(child->chan().send_pod(sender.qp->qp_num));
  AhPtr ah(create_ah(dev_.pd.get(), g.raw));
  ASSERT_TRUE(ah);

  ASSERT_EQ(sender.send(ah.get(), 77, 1000), 0);
  auto sc = poll_one(sender.cq.get());
  ASSERT_TRUE(sc && sc->status == IBV_WC_SUCCESS);
  for (UdQp* r : {&a, &b}) {
    auto wc = poll_one(r->cq.get());
    ASSERT_TRUE(wc) << "a member got nothing";
    EXPECT_EQ(wc->wr_id, 1u);
    EXPECT_EQ(check_recv(*wc, r->buf.data(), 77, 1000, sender.qp->qp_num, g), "");
  }
  EXPECT_EQ(child->wait_exit(), 0);

  // b leaves: the next datagram reaches a only. A datagram to the group
  // naming another QP than 0xFFFFFF is no multicast packet: nobody gets it.
  ASSERT_EQ(ibv_detach_mcast(b.qp.get(), &g, 0), 0);
  ASSERT_EQ(sender.send(ah.get(), 78, 300), 0);
  ASSERT_TRUE(poll_one(sender.cq.get()));
  auto wc = poll_one(a.cq.get());
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->wr_id, 2u);
  EXPECT_EQ(check_recv(*wc, a.buf.data() + 2048, 78, 300, sender.qp->qp_num, g), "");
  EXPECT_TRUE(drain_cq(b.cq.get(), 100).empty()) << "a detached QP received";
  ASSERT_EQ(a.post_recv(3, 0), 0);
  ASSERT_EQ(ibv_detach_mcast(a.qp.get(), &g, 0), 0);
  ASSERT_EQ(ibv_attach_mcast(a.qp.get(), &g, 0), 0);
  fill_pattern(sender.buf.data() + 4096, 64, 79);
  ibv_sge s{reinterpret_cast<uint64_t>(sender.buf.data() + 4096), 64, sender.mr->lkey};
  ibv_send_wr w{}, *bad = nullptr;
  w.opcode = IBV_WR_SEND;
  w.send_flags = IBV_SEND_SIGNALED;
  w.sg_list = &s;
  w.num_sge = 1;
  w.wr.ud.ah = ah.get();
  w.wr.ud.remote_qpn = a.qp->qp_num;
  w.wr.ud.remote_qkey = kQkey;
  ASSERT_EQ(ibv_post_send(sender.qp.get(), &w, &bad), 0);
  ASSERT_TRUE(poll_one(sender.cq.get()));
  EXPECT_TRUE(drain_cq(a.cq.get(), 100).empty()) << "a group datagram not for QP 0xFFFFFF was delivered";
  EXPECT_EQ(ibv_detach_mcast(a.qp.get(), &g, 0), 0);
}

}  // namespace
}  // namespace uroce::test
