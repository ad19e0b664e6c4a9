// UC and UD between two processes.
//  UC: SEND, RDMA WRITE, RDMA WRITE_WITH_IMM; a SEND with no receive posted is
//      dropped (unreliable: no RNR, the sender still completes successfully).
//  UD: SEND and SEND_WITH_IMM; the receive buffer starts with the 40-byte GRH
//      (IBV_WC_GRH set, byte_len = payload + 40, src_qp = the sender's QPN);
//      a wrong Q_Key drops the datagram silently (IBA C10-15).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "support/verbs_harness.h"

namespace uroce::test {
namespace {

constexpr uint32_t kGrh = 40;

class TwoEnds : public ::testing::Test {
 protected:
  void start(ibv_qp_type type) {
    EndConfig cfg;
    cfg.type = type;
    cfg.buf_bytes = 1u << 20;
    cfg.bg_seed = 50;
    std::string err;
    ASSERT_TRUE(local_.open(cfg, &err)) << err;
    cfg.bg_seed = 60;
    agent_ = Agent::start(cfg, &err);
    ASSERT_TRUE(agent_) << err;
    ASSERT_TRUE(agent_->connect(local_.info())) << agent_->error();
    ASSERT_TRUE(local_.connect(agent_->info(), &err)) << err;
  }

  // Posts one signaled WR; the sender must see success whatever the receiver did.
  void send(ibv_send_wr w) {
    w.send_flags |= IBV_SEND_SIGNALED;
    if (local_.cfg.type == IBV_QPT_UD) {
      w.wr.ud.ah = local_.ah.get();
      w.wr.ud.remote_qpn = agent_->info().qpn;
      if (!w.wr.ud.remote_qkey) w.wr.ud.remote_qkey = kQkey;
    }
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(local_.qp.get(), &w, &bad), 0);
    auto wc = poll_one(local_.scq.get());
    ASSERT_TRUE(wc) << "no send completion";
    EXPECT_EQ(wc->status, IBV_WC_SUCCESS) << wc_str(*wc);
    EXPECT_EQ(wc->wr_id, w.wr_id);
  }

  static ibv_send_wr wr(uint64_t id, ibv_wr_opcode op, ibv_sge* sg, uint32_t len) {
    ibv_send_wr w;
    memset(&w, 0, sizeof(w));
    w.wr_id = id;
    w.opcode = op;
    w.sg_list = sg;
    w.num_sge = len ? 1 : 0;
    return w;
  }

  LocalEnd local_;
  std::unique_ptr<Agent> agent_;
};

using UcTest = TwoEnds;
using UdTest = TwoEnds;

TEST_F(UcTest, SendWriteAndWriteWithImm) {
  ASSERT_NO_FATAL_FAILURE(start(IBV_QPT_UC));
  uint32_t seed = 100;
  for (uint32_t size : {0u, 1u, 4095u, 4096u, 65536u}) {
    SCOPED_TRACE(testing::Message() << "size " << size);
    // SEND_WITH_IMM and SEND.
    for (bool imm : {false, true}) {
      ++seed;
      ASSERT_EQ(agent_->post_recv(seed, {{0, 70000}}), 0);
      local_.mem.fill(0, size, seed);
      ibv_sge sg = local_.sge(0, size);
      ibv_send_wr w = wr(seed, imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, &sg, size);
      w.imm_data = imm_be(seed);
      ASSERT_NO_FATAL_FAILURE(send(w));
      ibv_wc wc;
      ASSERT_EQ(agent_->poll_recv(&wc), 1) << agent_->error();
      EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
      EXPECT_EQ(wc.wr_id, seed);
      EXPECT_EQ(wc.opcode, IBV_WC_RECV);
      EXPECT_EQ(wc.byte_len, size);
      EXPECT_EQ(bool(wc.wc_flags & IBV_WC_WITH_IMM), imm);
      if (imm) {
        EXPECT_EQ(ntohl(wc.imm_data), seed);
      }
      ASSERT_TRUE(agent_->expect(0, size, seed));
      EXPECT_EQ(agent_->verify(), "");
    }
    // RDMA WRITE.
    ++seed;
    local_.mem.fill(0, size, seed);
    ibv_sge sg = local_.sge(0, size);
    ibv_send_wr w = wr(seed, IBV_WR_RDMA_WRITE, &sg, size);
    w.wr.rdma.remote_addr = agent_->raddr(100001);
    w.wr.rdma.rkey = agent_->rkey();
    ASSERT_NO_FATAL_FAILURE(send(w));
    ASSERT_TRUE(agent_->expect(100001, size, seed));
    // A UC WRITE completes once sent (nothing acknowledges it): over the
    // network link the bytes land a moment later (bounded wait).
    std::string v;
    for (int i = 0; i < 1000 && !(v = agent_->verify()).empty(); ++i) usleep(1000);
    EXPECT_EQ(v, "");
    // RDMA WRITE_WITH_IMM: consumes a receive, leaves its buffer alone.
    ++seed;
    ASSERT_EQ(agent_->post_recv(seed, {{0, 64}}), 0);
    local_.mem.fill(0, size, seed);
    w = wr(seed, IBV_WR_RDMA_WRITE_WITH_IMM, &sg, size);
    w.wr.rdma.remote_addr = agent_->raddr(200003);
    w.wr.rdma.rkey = agent_->rkey();
    w.imm_data = imm_be(seed);
    ASSERT_NO_FATAL_FAILURE(send(w));
    ibv_wc wc;
    ASSERT_EQ(agent_->poll_recv(&wc), 1) << agent_->error();
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
    EXPECT_EQ(wc.wr_id, seed);
    EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_EQ(wc.byte_len, size);
    EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
    EXPECT_EQ(ntohl(wc.imm_data), seed);
    ASSERT_TRUE(agent_->expect(200003, size, seed));
    EXPECT_EQ(agent_->verify(), "");
  }
}

TEST_F(UcTest, SendWithoutAReceiveIsDropped) {
  ASSERT_NO_FATAL_FAILURE(start(IBV_QPT_UC));
  local_.mem.fill(0, 3000, 7);
  ibv_sge sg = local_.sge(0, 3000);
  ASSERT_NO_FATAL_FAILURE(send(wr(1, IBV_WR_SEND, &sg, 3000)));
  ibv_wc wc;
  EXPECT_EQ(agent_->poll_recv(&wc, 100), 0) << "unexpected " << wc_str(wc);
  EXPECT_EQ(agent_->verify(), "");
  // The QP still works: the next SEND lands in the next receive.
  ASSERT_EQ(agent_->post_recv(2, {{0, 4096}}), 0);
  local_.mem.fill(0, 3000, 8);
  ASSERT_NO_FATAL_FAILURE(send(wr(2, IBV_WR_SEND, &sg, 3000)));
  ASSERT_EQ(agent_->poll_recv(&wc), 1) << agent_->error();
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(wc.byte_len, 3000u);
  ASSERT_TRUE(agent_->expect(0, 3000, 8));
  EXPECT_EQ(agent_->verify(), "");
}

// Checks the GRH a UD receive got between two QPs of uroce_lo. Over IPv4
// (GID 1) the IPv4 header sits in the last 20 of the 40 bytes (rdma-core:
// ibv_grh for RoCE v2/IPv4); over IPv6 (GID 2, ::1) the GRH is the IPv6
// header, `payload` bytes after the UDP header's 8.
void expect_grh(const std::vector<uint8_t>& g, uint32_t payload) {
  ASSERT_EQ(g.size(), size_t(kGrh));
  if (gid_index() != 2) {
    const uint8_t* ip = g.data() + 20;
    EXPECT_EQ(ip[0] >> 4, 4) << "IP version";
    EXPECT_EQ(ip[9], 17) << "protocol UDP";
    const uint8_t lo[4] = {127, 0, 0, 1};
    EXPECT_EQ(memcmp(ip + 12, lo, 4), 0) << "source address";
    EXPECT_EQ(memcmp(ip + 16, lo, 4), 0) << "destination address";
    return;
  }
  EXPECT_EQ(g[0] >> 4, 6) << "IP version";
  // UDP 8 + BTH 12 + DETH 8 (+ ImmDt 4) + payload + pad + ICRC 4.
  const uint32_t len = uint32_t(g[4] << 8 | g[5]);
  EXPECT_GE(len, 8 + 12 + 8 + payload + 4);
  EXPECT_LE(len, 8 + 12 + 8 + 4 + payload + 3 + 4);
  EXPECT_EQ(g[6], 17) << "next header UDP";
  uint8_t lo6[16] = {};
  lo6[15] = 1;
  EXPECT_EQ(memcmp(g.data() + 8, lo6, 16), 0) << "source address";
  EXPECT_EQ(memcmp(g.data() + 24, lo6, 16), 0) << "destination address";
}

TEST_F(UdTest, SendAndSendWithImmCarryTheGrh) {
  ASSERT_NO_FATAL_FAILURE(start(IBV_QPT_UD));
  uint32_t seed = 200;
  for (uint32_t size : {0u, 1u, 1000u, 4096u}) {
    for (bool imm : {false, true}) {
      SCOPED_TRACE(testing::Message() << (imm ? "SEND_WITH_IMM" : "SEND") << " size " << size);
      ++seed;
      const uint64_t roff = 4096 + 3;
      ASSERT_EQ(agent_->post_recv(seed, {{roff, kGrh + 4096}}), 0);
      local_.mem.fill(0, size, seed);
      ibv_sge sg = local_.sge(0, size);
      ibv_send_wr w = wr(seed, imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, &sg, size);
      w.imm_data = imm_be(seed);
      ASSERT_NO_FATAL_FAILURE(send(w));
      ibv_wc wc;
      ASSERT_EQ(agent_->poll_recv(&wc), 1) << agent_->error();
      EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
      EXPECT_EQ(wc.wr_id, seed);
      EXPECT_EQ(wc.opcode, IBV_WC_RECV);
      EXPECT_EQ(wc.byte_len, size + kGrh) << wc_str(wc);
      EXPECT_TRUE(wc.wc_flags & IBV_WC_GRH) << wc_str(wc);
      EXPECT_EQ(wc.src_qp, local_.qp->qp_num) << wc_str(wc);
      EXPECT_EQ(wc.qp_num, agent_->info().qpn) << wc_str(wc);
      // The packet type, as mlx5 reports it in sl on RoCE: v2 (bit 3) over
      // IPv4 (2) or IPv6 (1). UCX reads it to find the GID in the GRH.
      EXPECT_EQ(wc.sl, gid_index() == 2 ? 0x9 : 0xA) << wc_str(wc);
      EXPECT_EQ(bool(wc.wc_flags & IBV_WC_WITH_IMM), imm) << wc_str(wc);
      if (imm) {
        EXPECT_EQ(ntohl(wc.imm_data), seed);
      }
      std::vector<uint8_t> grh = agent_->read_bytes(roff, kGrh);
      ASSERT_NO_FATAL_FAILURE(expect_grh(grh, size));
      ASSERT_TRUE(agent_->expect_bytes(roff, grh.data(), kGrh));
      ASSERT_TRUE(agent_->expect(roff + kGrh, size, seed));
      EXPECT_EQ(agent_->verify(), "");
    }
  }
}

TEST_F(UdTest, GrhAndPayloadScatterOverTwoSges) {
  // The usual UD layout: a 40-byte SGE for the GRH, the payload in another.
  ASSERT_NO_FATAL_FAILURE(start(IBV_QPT_UD));
  ASSERT_EQ(agent_->post_recv(5, {{1000, kGrh}, {9001, 2048}}), 0);
  local_.mem.fill(0, 2000, 300);
  ibv_sge sg = local_.sge(0, 2000);
  ASSERT_NO_FATAL_FAILURE(send(wr(5, IBV_WR_SEND, &sg, 2000)));
  ibv_wc wc;
  ASSERT_EQ(agent_->poll_recv(&wc), 1) << agent_->error();
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
  EXPECT_EQ(wc.byte_len, 2000 + kGrh);
  EXPECT_TRUE(wc.wc_flags & IBV_WC_GRH);
  std::vector<uint8_t> grh = agent_->read_bytes(1000, kGrh);
  ASSERT_NO_FATAL_FAILURE(expect_grh(grh, 2000));
  ASSERT_TRUE(agent_->expect_bytes(1000, grh.data(), kGrh));
  ASSERT_TRUE(agent_->expect(9001, 2000, 300));
  EXPECT_EQ(agent_->verify(), "");
}

TEST_F(UdTest, WrongQkeyIsDroppedSilently) {
  ASSERT_NO_FATAL_FAILURE(start(IBV_QPT_UD));
  ASSERT_EQ(agent_->post_recv(1, {{0, kGrh + 1024}}), 0);
  local_.mem.fill(0, 500, 400);
  ibv_sge sg = local_.sge(0, 500);
  ibv_send_wr w = wr(10, IBV_WR_SEND, &sg, 500);
  w.wr.ud.remote_qkey = kQkey ^ 0x5a5a;  // wrong: dropped at the receiver
  ASSERT_NO_FATAL_FAILURE(send(w));      // ... and the sender still succeeds
  ibv_wc wc;
  EXPECT_EQ(agent_->poll_recv(&wc, 100), 0) << "a datagram with a wrong Q_Key arrived: " << wc_str(wc);
  EXPECT_EQ(agent_->verify(), "") << "a dropped datagram touched the receive buffer";

  // The receive is still posted: the right Q_Key lands in it.
  local_.mem.fill(0, 500, 401);
  w = wr(11, IBV_WR_SEND, &sg, 500);
  ASSERT_NO_FATAL_FAILURE(send(w));
  ASSERT_EQ(agent_->poll_recv(&wc), 1) << agent_->error();
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.byte_len, 500 + kGrh);
  std::vector<uint8_t> grh = agent_->read_bytes(0, kGrh);
  ASSERT_EQ(grh.size(), size_t(kGrh));
  ASSERT_TRUE(agent_->expect_bytes(0, grh.data(), kGrh));
  ASSERT_TRUE(agent_->expect(kGrh, 500, 401));
  EXPECT_EQ(agent_->verify(), "");
}

// IBA 10.2.5 / ibv_post_send(3): a remote Q_Key with the high bit set means
// "use the sending QP's own Q_Key" (here equal to the receiver's).
TEST_F(UdTest, QkeyWithTheHighBitSetUsesTheQpsQkey) {
  ASSERT_NO_FATAL_FAILURE(start(IBV_QPT_UD));
  ASSERT_EQ(agent_->post_recv(1, {{0, kGrh + 1024}}), 0);
  local_.mem.fill(0, 64, 410);
  ibv_sge sg = local_.sge(0, 64);
  ibv_send_wr w = wr(1, IBV_WR_SEND, &sg, 64);
  w.wr.ud.remote_qkey = 0x80000000u;
  ASSERT_NO_FATAL_FAILURE(send(w));
  ibv_wc wc;
  ASSERT_EQ(agent_->poll_recv(&wc), 1) << agent_->error();
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << wc_str(wc);
  EXPECT_EQ(wc.byte_len, 64 + kGrh);
  std::vector<uint8_t> grh = agent_->read_bytes(0, kGrh);
  ASSERT_EQ(grh.size(), size_t(kGrh));
  ASSERT_TRUE(agent_->expect_bytes(0, grh.data(), kGrh));
  ASSERT_TRUE(agent_->expect(kGrh, 64, 410));
  EXPECT_EQ(agent_->verify(), "");
}

}  // namespace
}  // namespace uroce::test
