// Importing a context and its objects (ibv_import_device(3),
// ibv_import_pd(3), ibv_import_mr(3), ibv_import_dm(3)), as rdma-core's
// test_shared_pd and SharedDMTest use them: a dup of a context's cmd_fd
// gives another context on the same device state, whose PDs, MRs and
// device memory can be imported by handle and used by the new context's
// QPs; unimporting drops a handle and leaves the object.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

class Import : public VerbsTest {
 protected:
  void TearDown() override {
    if (imported_) ibv_close_device(imported_);
  }
  /// The context imported from a dup of ctx_'s cmd_fd.
  ibv_context* import_ctx() {
    imported_ = ibv_import_device(dup(ctx_->cmd_fd));
    return imported_;
  }
  ibv_context* imported_ = nullptr;
};

TEST_F(Import, ADupOfTheCmdFdNamesTheContextAndNothingElseDoes) {
  ASSERT_NE(import_ctx(), nullptr) << strerror(errno);
  EXPECT_STREQ(ibv_get_device_name(imported_->device), ibv_get_device_name(ctx_->device));
  EXPECT_NE(imported_->cmd_fd, ctx_->cmd_fd);
  ibv_device_attr a{};
  EXPECT_EQ(ibv_query_device(imported_, &a), 0);
  // The man page asks for a dup: a context's own descriptor is EINVAL (it
  // would have two owners); one of no context of this process names none.
  errno = 0;
  EXPECT_EQ(ibv_import_device(ctx_->cmd_fd), nullptr);
  EXPECT_EQ(errno, EINVAL);
  const int other = eventfd(0, EFD_CLOEXEC);
  ASSERT_GE(other, 0);
  errno = 0;
  EXPECT_EQ(ibv_import_device(other), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  close(other);
  errno = 0;
  EXPECT_EQ(ibv_import_device(-1), nullptr);
  EXPECT_EQ(errno, EBADF);
}

TEST_F(Import, PdAndMrHandlesImportAndUnknownOnesAreEinval) {
  ASSERT_NE(import_ctx(), nullptr) << strerror(errno);
  ibv_pd* pd = ibv_alloc_pd(ctx_);
  ASSERT_NE(pd, nullptr);
  std::vector<uint8_t> buf(4096);
  ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(mr, nullptr);

  ibv_pd* ipd = ibv_import_pd(imported_, pd->handle);
  ASSERT_NE(ipd, nullptr) << strerror(errno);
  EXPECT_EQ(ipd->handle, pd->handle);
  EXPECT_EQ(ipd->context, imported_);
  ibv_mr* imr = ibv_import_mr(ipd, mr->handle);
  ASSERT_NE(imr, nullptr) << strerror(errno);
  EXPECT_EQ(imr->lkey, mr->lkey);
  EXPECT_EQ(imr->rkey, mr->rkey);
  EXPECT_EQ(imr->length, mr->length);
  EXPECT_EQ(imr->addr, nullptr);  // as rdma-core reports an imported MR
  EXPECT_EQ(imr->pd, ipd);

  errno = 0;
  EXPECT_EQ(ibv_import_pd(imported_, pd->handle + 1000), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_import_mr(ipd, mr->handle + 0x100), nullptr);
  EXPECT_EQ(errno, EINVAL);

  // Unimporting drops the handles; the objects stay and go as usual.
  ibv_unimport_mr(imr);
  ibv_unimport_pd(ipd);
  const uint32_t mr_handle = mr->handle;
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  errno = 0;
  EXPECT_EQ(ibv_import_mr(pd, mr_handle), nullptr);  // deregistered: gone for everyone
  EXPECT_EQ(errno, EINVAL);
  const uint32_t h = pd->handle;
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  errno = 0;
  EXPECT_EQ(ibv_import_pd(imported_, h), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

// The imported context's QP works with the imported PD and MR: it sends
// from the region and a peer writes into it through the imported rkey,
// also after the original context is closed.
TEST_F(Import, TheImportedContextsQpUsesTheImportedRegion) {
  Endpoint target;
  ASSERT_TRUE(make_endpoint(ctx_, {}, &target));
  ASSERT_NE(import_ctx(), nullptr) << strerror(errno);
  ibv_pd* ipd = ibv_import_pd(imported_, target.pd->handle);
  ASSERT_NE(ipd, nullptr);
  ibv_mr* imr = ibv_import_mr(ipd, target.mr->handle);
  ASSERT_NE(imr, nullptr);
  ibv_cq* cq = ibv_create_cq(imported_, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap = {8, 8, 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(ipd, &qa);
  ASSERT_NE(qp, nullptr) << strerror(errno);

  Endpoint peer;
  ASSERT_TRUE(make_endpoint(ctx_, {}, &peer));
  ASSERT_EQ(connect_rc(qp, peer.qp->qp_num, gid_, {}), 0);
  ASSERT_EQ(connect_rc(peer.qp, qp->qp_num, gid_, {}), 0);

  // A SEND from the imported region (its lkey) to the peer.
  memset(target.at(0), 0x5a, 256);
  ibv_sge rs = peer.sge(0, 256);
  ASSERT_EQ(post_recv(peer.qp, 1, &rs, 1), 0);
  ibv_sge ss{target.addr(0), 256, imr->lkey};
  ASSERT_EQ(post_send(qp, 2, IBV_WR_SEND, &ss, 1), 0);
  auto sw = poll_one(cq);
  ASSERT_TRUE(sw);
  EXPECT_EQ(sw->status, IBV_WC_SUCCESS) << ibv_wc_status_str(sw->status);
  auto rw = poll_one(peer.recv_cq);
  ASSERT_TRUE(rw);
  EXPECT_EQ(rw->status, IBV_WC_SUCCESS);
  EXPECT_EQ(peer.at(0)[255], 0x5a);

  // The peer writes into the region through the imported QP (its rkey).
  memset(peer.at(1024), 0xc3, 128);
  ibv_sge ws = peer.sge(1024, 128);
  ASSERT_EQ(post_send(peer.qp, 3, IBV_WR_RDMA_WRITE, &ws, 1, target.addr(2048), imr->rkey), 0);
  auto ww = poll_one(peer.send_cq);
  ASSERT_TRUE(ww);
  EXPECT_EQ(ww->status, IBV_WC_SUCCESS) << ibv_wc_status_str(ww->status);
  EXPECT_EQ(target.at(2048)[127], 0xc3);

  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
  ibv_unimport_mr(imr);
  ibv_unimport_pd(ipd);
}

TEST_F(Import, DeviceMemoryImportsAndReadsWhatTheOriginalWrote) {
  ibv_device_attr_ex ax{};
  ASSERT_EQ(ibv_query_device_ex(ctx_, nullptr, &ax), 0);
  if (ax.max_dm_size == 0) GTEST_SKIP() << "no device memory";
  ibv_alloc_dm_attr da{};
  da.length = 256;
  ibv_dm* dm = ibv_alloc_dm(ctx_, &da);
  ASSERT_NE(dm, nullptr) << strerror(errno);
  ASSERT_NE(import_ctx(), nullptr);
  ibv_dm* idm = ibv_import_dm(imported_, dm->handle);
  ASSERT_NE(idm, nullptr) << strerror(errno);
  EXPECT_EQ(idm->handle, dm->handle);
  std::vector<uint8_t> in(256, 0xab), out(256, 0);
  ASSERT_EQ(ibv_memcpy_to_dm(dm, 0, in.data(), in.size()), 0);
  ASSERT_EQ(ibv_memcpy_from_dm(out.data(), idm, 0, out.size()), 0);
  EXPECT_EQ(out, in);
  errno = 0;
  EXPECT_EQ(ibv_import_dm(imported_, dm->handle + 1000), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_unimport_dm(idm);
  const uint32_t h = dm->handle;
  EXPECT_EQ(ibv_free_dm(dm), 0);
  errno = 0;
  EXPECT_EQ(ibv_import_dm(imported_, h), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

// The imported context keeps the device state alive after the original
// one closes (as the kernel's ucontext lives while any of its files does).
TEST_F(Import, TheImportOutlivesTheOriginalContext) {
  ibv_context* orig = open_lo();
  ASSERT_NE(orig, nullptr);
  ibv_pd* pd = ibv_alloc_pd(orig);
  ASSERT_NE(pd, nullptr);
  ibv_context* imp = ibv_import_device(dup(orig->cmd_fd));
  ASSERT_NE(imp, nullptr);
  ibv_pd* ipd = ibv_import_pd(imp, pd->handle);
  ASSERT_NE(ipd, nullptr);
  ibv_unimport_pd(ipd);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(ibv_close_device(orig), 0);
  // What the import's own objects need still works.
  ibv_pd* p2 = ibv_alloc_pd(imp);
  ASSERT_NE(p2, nullptr);
  std::vector<uint8_t> buf(4096);
  ibv_mr* mr = ibv_reg_mr(p2, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr) << strerror(errno);
  ibv_cq* cq = ibv_create_cq(imp, 4, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(p2), 0);
  EXPECT_EQ(ibv_close_device(imp), 0);
}

}  // namespace
}  // namespace uroce::fault
