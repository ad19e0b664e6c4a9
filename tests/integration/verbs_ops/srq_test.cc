// A shared receive queue in this process serving two RC QPs whose peers are
// two other processes; the SRQ limit event (IBV_EVENT_SRQ_LIMIT_REACHED)
// arrives on the context's async fd once the queue drains below the armed
// limit, exactly once, and disarms the limit (ibv_modify_srq(3)).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "support/verbs_harness.h"

namespace uroce::test {
namespace {

constexpr uint32_t kRecvs = 16;
constexpr uint32_t kLimit = 4;
constexpr uint64_t kSlotBytes = 8192;
// Each receive scatters over two SGEs: 1024 bytes, a gap, then 4096 bytes.
constexpr uint64_t kSge0 = 0, kSge0Len = 1024, kSge1 = 2048, kSge1Len = 4096;

uint32_t msg_len(int sender, int j) { return 1000 + 100 * uint32_t(j) + 50 * uint32_t(sender); }
uint32_t msg_seed(int sender, int j) { return 1000 * uint32_t(sender + 1) + uint32_t(j); }

/// poll() on the async fd; true if an event is readable within timeout_ms.
bool async_readable(ibv_context* ctx, int timeout_ms) {
  pollfd p{ctx->async_fd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

TEST(SrqTest, TwoRemoteProcessesShareOneSrqAndTheLimitEventFiresOnce) {
  Device dev;
  std::string err;
  ASSERT_TRUE(open_device(&dev, &err)) << err;
  ibv_context* ctx = dev.ctx.get();
  CqPtr scq(ibv_create_cq(ctx, 64, nullptr, nullptr, 0));
  CqPtr rcq(ibv_create_cq(ctx, 64, nullptr, nullptr, 0));
  ASSERT_TRUE(scq && rcq);
  ibv_srq_init_attr sa;
  memset(&sa, 0, sizeof(sa));
  sa.attr.max_wr = 64;
  sa.attr.max_sge = 2;
  SrqPtr srq(ibv_create_srq(dev.pd.get(), &sa));
  ASSERT_TRUE(srq) << strerror(errno);
  ShadowedMemory mem;
  ASSERT_TRUE(mem.allocate(kRecvs * kSlotBytes));
  mem.fill(0, mem.size(), 77);
  MrPtr mr(ibv_reg_mr(dev.pd.get(), mem.data(), mem.size(), kRemoteAccess));
  ASSERT_TRUE(mr);

  QpPtr qp[2];
  std::unique_ptr<Agent> sender[2];
  for (int k = 0; k < 2; ++k) {
    qp[k].reset(create_qp(dev.pd.get(), IBV_QPT_RC, scq.get(), rcq.get(), srq.get(), QpCaps{}));
    ASSERT_TRUE(qp[k]) << strerror(errno);
    EndConfig cfg;
    cfg.buf_bytes = 1u << 20;
    cfg.bg_seed = 90 + k;
    sender[k] = Agent::start(cfg, &err);
    ASSERT_TRUE(sender[k]) << err;
    WireInfo mine;
    mine.qpn = qp[k]->qp_num;
    memcpy(mine.gid, dev.gid.raw, 16);
    ASSERT_TRUE(sender[k]->connect(mine)) << sender[k]->error();
    ASSERT_TRUE(connect_qp(qp[k].get(), IBV_QPT_RC, sender[k]->info(), 0, &err)) << err;
  }

  for (uint32_t i = 0; i < kRecvs; ++i) {
    ibv_sge sg[2] = {{mem.addr(i * kSlotBytes + kSge0), uint32_t(kSge0Len), mr->lkey},
                     {mem.addr(i * kSlotBytes + kSge1), uint32_t(kSge1Len), mr->lkey}};
    ibv_recv_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = i;
    wr.sg_list = sg;
    wr.num_sge = 2;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_srq_recv(srq.get(), &wr, &bad), 0);
  }
  ibv_srq_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.srq_limit = kLimit;
  ASSERT_EQ(ibv_modify_srq(srq.get(), &attr, IBV_SRQ_LIMIT), 0);
  memset(&attr, 0, sizeof(attr));
  ASSERT_EQ(ibv_query_srq(srq.get(), &attr), 0);
  EXPECT_EQ(attr.srq_limit, kLimit);

  int sent[2] = {0, 0};
  auto send_some = [&](int k, int n) {
    for (int i = 0; i < n; ++i) {
      const int j = sent[k]++;
      ASSERT_TRUE(sender[k]->fill(0, msg_len(k, j), msg_seed(k, j)));
      AgentSend s;
      s.wr_id = uint64_t(j);
      s.sges = {{0, msg_len(k, j)}};
      ASSERT_EQ(sender[k]->post_send(s), 0) << sender[k]->error();
      ibv_wc wc;
      ASSERT_EQ(sender[k]->poll_send(&wc), 1) << sender[k]->error();
      EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << "sender " << k << ": " << wc_str(wc);
    }
  };

  // 10 of 16 consumed: 6 left, not below the limit of 4 -> no event yet.
  ASSERT_NO_FATAL_FAILURE(send_some(0, 5));
  ASSERT_NO_FATAL_FAILURE(send_some(1, 5));
  EXPECT_FALSE(async_readable(ctx, 0)) << "SRQ limit event while still above the limit";

  // 13 consumed: 3 left < 4 -> the event.
  ASSERT_NO_FATAL_FAILURE(send_some(0, 2));
  ASSERT_NO_FATAL_FAILURE(send_some(1, 1));
  ASSERT_TRUE(async_readable(ctx, kWaitMs)) << "no SRQ limit event on the async fd";
  // Readable, and O_NONBLOCK keeps ibv_get_async_event bounded anyway.
  ASSERT_EQ(fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK), 0);
  ibv_async_event ev;
  ASSERT_EQ(ibv_get_async_event(ctx, &ev), 0) << strerror(errno);
  EXPECT_EQ(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED) << ibv_event_type_str(ev.event_type);
  EXPECT_EQ(ev.element.srq, srq.get());
  ibv_ack_async_event(&ev);
  // The event disarms the limit.
  memset(&attr, 0, sizeof(attr));
  ASSERT_EQ(ibv_query_srq(srq.get(), &attr), 0);
  EXPECT_EQ(attr.srq_limit, 0u);

  // Draining the rest raises nothing more.
  ASSERT_NO_FATAL_FAILURE(send_some(0, 1));
  ASSERT_NO_FATAL_FAILURE(send_some(1, 2));
  EXPECT_FALSE(async_readable(ctx, 0)) << "a second SRQ limit event without re-arming";

  // Every receive completed once, on the QP of the process that sent it,
  // with that process's bytes scattered over the two SGEs.
  std::vector<ibv_wc> wcs = poll_n(rcq.get(), kRecvs);
  ASSERT_EQ(wcs.size(), size_t(kRecvs));
  std::set<uint64_t> slots;
  std::set<std::pair<int, int>> msgs;
  for (const ibv_wc& wc : wcs) {
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
    EXPECT_EQ(wc.opcode, IBV_WC_RECV) << wc_str(wc);
    ASSERT_LT(wc.wr_id, kRecvs);
    EXPECT_TRUE(slots.insert(wc.wr_id).second) << "receive " << wc.wr_id << " completed twice";
    const int k = wc.qp_num == qp[0]->qp_num ? 0 : wc.qp_num == qp[1]->qp_num ? 1 : -1;
    ASSERT_GE(k, 0) << "completion on an unknown QP: " << wc_str(wc);
    int j = -1;
    for (int c = 0; c < sent[k]; ++c)
      if (msg_len(k, c) == wc.byte_len) j = c;
    ASSERT_GE(j, 0) << "no message of that length from sender " << k << ": " << wc_str(wc);
    EXPECT_TRUE(msgs.insert({k, j}).second);
    const uint64_t base = wc.wr_id * kSlotBytes;
    const uint32_t len = msg_len(k, j);
    const uint32_t first = std::min<uint32_t>(len, kSge0Len);
    mem.expect(base + kSge0, first, msg_seed(k, j), 0);
    mem.expect(base + kSge1, len - first, msg_seed(k, j), first);
  }
  EXPECT_EQ(mem.verify(), "");
  EXPECT_TRUE(drain_cq(rcq.get(), 20).empty());
}

}  // namespace
}  // namespace uroce::test
