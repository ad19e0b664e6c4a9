// ibv_open_qp (IBA 11.5, man ibv_open_qp): a second process that opened the
// same XRC domain gets its own handle on an XRC target QP created elsewhere.
// Modify and query through either handle act on the one QP; destroying the
// opened handle leaves the QP to its creator; wrong numbers, types and
// domains fail as the kernel fails them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "support/verbs_harness.h"

namespace uroce::test {
namespace {

enum Step : uint32_t { kOpened = 1, kModifiedToRtr, kCreatorDestroyed, kDone };

struct Shared {
  uint32_t qpn;
  char xrcd_file[200];
  char other_file[200];
};

ibv_xrcd* open_xrcd_file(ibv_context* ctx, const char* path, int* fd) {
  *fd = open(path, O_RDONLY | O_CREAT, 0600);
  if (*fd < 0) return nullptr;
  ibv_xrcd_init_attr a;
  memset(&a, 0, sizeof(a));
  a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  a.fd = *fd;
  a.oflags = O_CREAT;
  return ibv_open_xrcd(ctx, &a);
}

ibv_qp* open_qp(ibv_context* ctx, ibv_xrcd* xrcd, uint32_t qpn, ibv_qp_type type, uint32_t mask) {
  ibv_qp_open_attr a;
  memset(&a, 0, sizeof(a));
  a.comp_mask = mask;
  a.qp_num = qpn;
  a.xrcd = xrcd;
  a.qp_context = reinterpret_cast<void*>(0x1234);
  a.qp_type = type;
  return ibv_open_qp(ctx, &a);
}

constexpr uint32_t kAllMask =
    IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE | IBV_QP_OPEN_ATTR_CONTEXT;

/// The opener: checks the error cases, opens the QP, moves it to RTR, and
/// sees ENODEV once the creator destroyed it.
int opener_main(Channel& ch) {
  Shared sh;
  CHILD_CHECK(ch.recv_pod(&sh), ch.error());
  Device d;
  std::string err;
  CHILD_CHECK(open_device(&d, &err), err);
  int fd = -1, other_fd = -1;
  ibv_xrcd* xrcd = open_xrcd_file(d.ctx.get(), sh.xrcd_file, &fd);
  ibv_xrcd* other = open_xrcd_file(d.ctx.get(), sh.other_file, &other_fd);
  CHILD_CHECK(xrcd && other, "ibv_open_xrcd");

  errno = 0;
  CHILD_CHECK(!open_qp(d.ctx.get(), xrcd, sh.qpn + 1000, IBV_QPT_XRC_RECV, kAllMask) && errno == EINVAL,
              "unknown QPN: want EINVAL, errno " + std::to_string(errno));
  errno = 0;
  CHILD_CHECK(!open_qp(d.ctx.get(), xrcd, sh.qpn, IBV_QPT_RC, kAllMask) && errno == EINVAL,
              "RC type: want EINVAL, errno " + std::to_string(errno));
  errno = 0;
  CHILD_CHECK(!open_qp(d.ctx.get(), other, sh.qpn, IBV_QPT_XRC_RECV, kAllMask) && errno == EINVAL,
              "other domain: want EINVAL, errno " + std::to_string(errno));
  errno = 0;
  CHILD_CHECK(
      !open_qp(d.ctx.get(), xrcd, sh.qpn, IBV_QPT_XRC_RECV, IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD) &&
          errno == EINVAL,
      "no TYPE in comp_mask: want EINVAL, errno " + std::to_string(errno));
  errno = 0;
  CHILD_CHECK(!open_qp(d.ctx.get(), xrcd, sh.qpn, IBV_QPT_XRC_RECV, kAllMask | IBV_QP_OPEN_ATTR_RESERVED) &&
                  errno == EOPNOTSUPP,
              "reserved comp_mask bit: want EOPNOTSUPP, errno " + std::to_string(errno));

  ibv_qp* qp = open_qp(d.ctx.get(), xrcd, sh.qpn, IBV_QPT_XRC_RECV, kAllMask);
  CHILD_CHECK(qp, "ibv_open_qp: " + std::string(strerror(errno)));
  CHILD_CHECK(qp->qp_num == sh.qpn && qp->qp_type == IBV_QPT_XRC_RECV && qp->state == IBV_QPS_UNKNOWN &&
                  qp->qp_context == reinterpret_cast<void*>(0x1234) && !qp->pd && !qp->send_cq,
              "opened ibv_qp fields");
  CHILD_CHECK(ibv_close_xrcd(xrcd) == EBUSY, "the open QP holds its domain");
  ibv_qp_attr qa;
  ibv_qp_init_attr ia;
  CHILD_CHECK(ibv_query_qp(qp, &qa, IBV_QP_STATE, &ia) == 0 && qa.qp_state == IBV_QPS_INIT,
              "query through the opened handle: INIT");
  CHILD_CHECK(ch.send_pod(uint32_t(kOpened)), "send");

  // INIT -> RTR through this handle.
  memset(&qa, 0, sizeof(qa));
  qa.qp_state = IBV_QPS_RTR;
  qa.path_mtu = IBV_MTU_1024;
  qa.dest_qp_num = 0x77;
  qa.rq_psn = 0;
  qa.max_dest_rd_atomic = 1;
  qa.min_rnr_timer = 12;
  qa.ah_attr.is_global = 1;
  qa.ah_attr.grh.hop_limit = 1;
  memcpy(qa.ah_attr.grh.dgid.raw, d.gid.raw, 16);
  qa.ah_attr.grh.sgid_index = gid_index();
  qa.ah_attr.port_num = 1;
  int rc = ibv_modify_qp(qp, &qa,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  CHILD_CHECK(rc == 0, "modify to RTR through the opened handle: " + std::string(strerror(rc)));
  CHILD_CHECK(ch.send_pod(uint32_t(kModifiedToRtr)), "send");

  uint32_t step = 0;
  CHILD_CHECK(ch.recv_pod(&step) && step == kCreatorDestroyed, ch.error());
  rc = ibv_query_qp(qp, &qa, IBV_QP_STATE, &ia);
  CHILD_CHECK(rc == ENODEV,
              "query after the creator destroyed the QP: want ENODEV, got " + std::to_string(rc));
  CHILD_CHECK(ibv_destroy_qp(qp) == 0, "destroy the opened handle");
  CHILD_CHECK(ibv_close_xrcd(xrcd) == 0 && ibv_close_xrcd(other) == 0, "close domains");
  close(fd);
  close(other_fd);
  return ch.send_pod(uint32_t(kDone)) ? 0 : 1;
}

TEST(XrcOpenQpTest, AnotherProcessOpensModifiesAndClosesAnXrcTargetQp) {
  Device d;
  std::string err;
  ASSERT_TRUE(open_device(&d, &err)) << err;
  Shared sh{};
  snprintf(sh.xrcd_file, sizeof(sh.xrcd_file), "/tmp/uroce-open-qp-%d.xrcd", getpid());
  snprintf(sh.other_file, sizeof(sh.other_file), "/tmp/uroce-open-qp-%d.other", getpid());
  int fd = -1;
  ibv_xrcd* xrcd = open_xrcd_file(d.ctx.get(), sh.xrcd_file, &fd);
  ASSERT_TRUE(xrcd) << strerror(errno);

  ibv_qp_init_attr_ex ia;
  memset(&ia, 0, sizeof(ia));
  ia.qp_type = IBV_QPT_XRC_RECV;
  ia.comp_mask = IBV_QP_INIT_ATTR_XRCD;
  ia.xrcd = xrcd;
  ibv_qp* tgt = ibv_create_qp_ex(d.ctx.get(), &ia);
  ASSERT_TRUE(tgt) << strerror(errno);
  ibv_qp_attr qa;
  memset(&qa, 0, sizeof(qa));
  qa.qp_state = IBV_QPS_INIT;
  qa.port_num = 1;
  qa.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  ASSERT_EQ(ibv_modify_qp(tgt, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
  sh.qpn = tgt->qp_num;

  auto opener = PeerProcess::spawn(opener_main);
  ASSERT_TRUE(opener);
  ASSERT_TRUE(opener->chan().send_pod(sh));
  uint32_t step = 0;
  ASSERT_TRUE(opener->chan().recv_pod(&step)) << opener->chan().error();
  ASSERT_EQ(step, uint32_t(kOpened));
  ASSERT_TRUE(opener->chan().recv_pod(&step)) << opener->chan().error();
  ASSERT_EQ(step, uint32_t(kModifiedToRtr));

  // The creator sees what the opener did: one QP.
  ibv_qp_init_attr init;
  ASSERT_EQ(ibv_query_qp(tgt, &qa, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_DEST_QPN, &init), 0);
  EXPECT_EQ(qa.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(qa.min_rnr_timer, 12);
  EXPECT_EQ(qa.dest_qp_num, 0x77u);

  ASSERT_EQ(ibv_destroy_qp(tgt), 0);
  ASSERT_TRUE(opener->chan().send_pod(uint32_t(kCreatorDestroyed)));
  ASSERT_TRUE(opener->chan().recv_pod(&step)) << opener->chan().error();
  EXPECT_EQ(step, uint32_t(kDone));
  EXPECT_EQ(opener->wait_exit(), 0);
  EXPECT_EQ(ibv_close_xrcd(xrcd), 0);
  close(fd);
  unlink(sh.xrcd_file);
  unlink(sh.other_file);
}

}  // namespace
}  // namespace uroce::test
