// On-demand paging across processes: what sets an on-demand region apart on
// uroce is that its pages are never shared with peers at registration
// (core/context.cc share_pages), so a peer's RDMA reaches whatever the owner
// has mapped at that address at the time. The owner maps a fresh page over
// its registered one; a READ from another process must see the new page.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "support/verbs_harness.h"

namespace uroce::test {
namespace {

TEST(OdpProcess, APeerReachesWhatTheOwnerMapsAfterRegistering) {
  EndConfig cfg;
  std::string err;
  LocalEnd local;
  ASSERT_TRUE(local.open(cfg, &err)) << err;
  auto owner = PeerProcess::spawn([](Channel& ch) {
    Device d;
    std::string e;
    CHILD_CHECK(open_device(&d, &e), e);
    CqPtr cq(ibv_create_cq(d.ctx.get(), 16, nullptr, nullptr, 0));
    CHILD_CHECK(cq != nullptr, "ibv_create_cq");
    QpPtr qp(create_qp(d.pd.get(), IBV_QPT_RC, cq.get(), cq.get(), nullptr, QpCaps{}));
    CHILD_CHECK(qp != nullptr, "create_qp");
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    void* m = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHILD_CHECK(m != MAP_FAILED, "mmap");
    memset(m, 0x11, page);
    MrPtr mr(ibv_reg_mr(d.pd.get(), m, page,
                        IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ));
    CHILD_CHECK(mr != nullptr, "ibv_reg_mr(ON_DEMAND)");
    WireInfo me;
    me.qpn = qp->qp_num;
    me.rkey = mr->rkey;
    me.addr = reinterpret_cast<uint64_t>(m);
    me.len = page;
    memcpy(me.gid, d.gid.raw, 16);
    CHILD_CHECK(ch.send_pod(me), "send info");
    WireInfo peer;
    CHILD_CHECK(ch.recv_pod(&peer), "recv info");
    CHILD_CHECK(connect_qp(qp.get(), IBV_QPT_RC, peer, 0, &e), e);
    // A new page at the same address, with other content.
    CHILD_CHECK(mmap(m, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == m,
                "mmap MAP_FIXED");
    memset(m, 0x22, page);
    CHILD_CHECK(ch.send_pod(uint32_t(1)), "send remapped");
    uint32_t done;
    CHILD_CHECK(ch.recv_pod(&done), "recv done");
    return 0;
  });
  ASSERT_TRUE(owner);
  WireInfo target;
  ASSERT_TRUE(owner->chan().recv_pod(&target)) << owner->chan().error();
  ASSERT_TRUE(owner->chan().send_pod(local.info()));
  ASSERT_TRUE(local.connect(target, &err)) << err;
  uint32_t remapped;
  ASSERT_TRUE(owner->chan().recv_pod(&remapped)) << owner->chan().error();

  ibv_sge s = local.sge(0, 64);
  ibv_send_wr w{};
  w.wr_id = 1;
  w.opcode = IBV_WR_RDMA_READ;
  w.sg_list = &s;
  w.num_sge = 1;
  w.send_flags = IBV_SEND_SIGNALED;
  w.wr.rdma.remote_addr = target.addr;
  w.wr.rdma.rkey = target.rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(local.qp.get(), &w, &bad), 0);
  auto wc = poll_one(local.scq.get());
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << wc_str(*wc);
  EXPECT_EQ(local.mem.data()[0], 0x22) << "the READ saw the page registered, not the one mapped now";
  EXPECT_EQ(local.mem.data()[63], 0x22);
  ASSERT_TRUE(owner->chan().send_pod(uint32_t(1)));
  EXPECT_EQ(owner->wait_exit(), 0);
}

}  // namespace
}  // namespace uroce::test
