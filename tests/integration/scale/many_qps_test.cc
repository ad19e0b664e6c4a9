// 1,000 connected RC QP pairs between two processes. Each side creates 1,000
// QPs on one send CQ and one receive CQ, the sides exchange QPNs and connect
// QP i to the peer's QP i, and every QP carries one SEND in each direction,
// both directions at once. Each message has its own length and content, so a
// completion on the wrong QP, a payload in the wrong buffer or a lost or
// duplicated message shows. The CQs are sized for exactly the load: every
// completion of a side is queued before that side polls, with no overflow.
// Then both sides destroy everything and check each destroy succeeds.
#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "support/verbs_harness.h"

namespace uroce::test {
namespace {

constexpr int kQps = 1000;
/// Each CQ takes one completion per QP: size them for exactly that.
constexpr int kCqe = kQps;
constexpr uint64_t kSlotBytes = 512;
constexpr uint64_t kSendArea = 0;                            // slot i: what QP i sends
constexpr uint64_t kRecvArea = uint64_t(kQps) * kSlotBytes;  // slot i: what QP i receives
constexpr size_t kBufBytes = 2 * size_t(kQps) * kSlotBytes;
constexpr int kPhaseMs = 30000;  // bound for one phase over all 1,000 QPs

/// Distinct lengths (1..kSlotBytes) so a payload delivered to the wrong QP shows.
uint32_t msg_len(int dir, int i) { return 1 + uint32_t((i * 37 + dir * 101) % int(kSlotBytes)); }
uint32_t msg_seed(int dir, int i) { return 10000u * uint32_t(dir + 1) + uint32_t(i); }

bool fail(std::string* err, std::string what) {
  *err = std::move(what);
  return false;
}

/// One side's QPNs and GID; one message on the channel.
struct SideInfo {
  uint8_t gid[16];
  uint32_t qpn[kQps];
};

struct Report {
  int32_t ok = 0;
  char msg[256] = {};
};

/// One side: a device, two shared CQs, kQps QPs and one registered buffer.
/// Members are declared in destruction order.
struct Side {
  Device dev;
  CqPtr scq, rcq;
  ShadowedMemory mem;
  MrPtr mr;
  std::vector<QpPtr> qps;
  std::unordered_map<uint32_t, int> index_of_qpn;

  bool open(uint32_t bg_seed, std::string* err) {
    if (!open_device(&dev, err)) return false;
    scq.reset(ibv_create_cq(dev.ctx.get(), kCqe, nullptr, nullptr, 0));
    rcq.reset(ibv_create_cq(dev.ctx.get(), kCqe, nullptr, nullptr, 0));
    if (!scq || !rcq) return fail(err, "ibv_create_cq: " + std::string(strerror(errno)));
    if (scq->cqe < kCqe || rcq->cqe < kCqe) return fail(err, "CQ smaller than asked");
    if (!mem.allocate(kBufBytes)) return fail(err, "mmap failed");
    mem.fill(0, kBufBytes, bg_seed);
    mr.reset(ibv_reg_mr(dev.pd.get(), mem.data(), kBufBytes, IBV_ACCESS_LOCAL_WRITE));
    if (!mr) return fail(err, "ibv_reg_mr: " + std::string(strerror(errno)));
    QpCaps caps;
    caps.max_send_wr = 2;
    caps.max_recv_wr = 2;
    caps.max_sge = 1;
    caps.max_inline = 0;
    qps.reserve(kQps);
    for (int i = 0; i < kQps; ++i) {
      qps.emplace_back(create_qp(dev.pd.get(), IBV_QPT_RC, scq.get(), rcq.get(), nullptr, caps));
      if (!qps.back()) {
        return fail(err, "ibv_create_qp #" + std::to_string(i) + ": " + strerror(errno));
      }
      if (!index_of_qpn.emplace(qps.back()->qp_num, i).second) {
        return fail(err, "QPN " + std::to_string(qps.back()->qp_num) + " handed out twice");
      }
    }
    return true;
  }

  SideInfo info() const {
    SideInfo s{};
    memcpy(s.gid, dev.gid.raw, 16);
    for (int i = 0; i < kQps; ++i) s.qpn[i] = qps[i]->qp_num;
    return s;
  }

  /// Connects QP i to peer QP i and posts its one receive.
  bool connect_all(const SideInfo& peer, std::string* err) {
    WireInfo w;
    memcpy(w.gid, peer.gid, 16);
    for (int i = 0; i < kQps; ++i) {
      w.qpn = peer.qpn[i];
      if (!connect_qp(qps[i].get(), IBV_QPT_RC, w, 0, err)) {
        *err = "QP #" + std::to_string(i) + ": " + *err;
        return false;
      }
      ibv_sge sg{mem.addr(kRecvArea + uint64_t(i) * kSlotBytes), uint32_t(kSlotBytes), mr->lkey};
      ibv_recv_wr wr{};
      wr.wr_id = uint64_t(i);
      wr.sg_list = &sg;
      wr.num_sge = 1;
      ibv_recv_wr* bad = nullptr;
      if (int rc = ibv_post_recv(qps[i].get(), &wr, &bad)) {
        *err = "ibv_post_recv on QP #" + std::to_string(i) + ": " + strerror(rc);
        return false;
      }
    }
    return true;
  }

  /// One SEND on every QP; all complete into the one send CQ.
  bool send_all(int dir, std::string* err) {
    for (int i = 0; i < kQps; ++i) {
      const uint64_t off = kSendArea + uint64_t(i) * kSlotBytes;
      mem.fill(off, msg_len(dir, i), msg_seed(dir, i));
      ibv_sge sg{mem.addr(off), msg_len(dir, i), mr->lkey};
      ibv_send_wr wr{};
      wr.wr_id = uint64_t(i);
      wr.opcode = IBV_WR_SEND;
      wr.sg_list = &sg;
      wr.num_sge = 1;
      wr.send_flags = IBV_SEND_SIGNALED;
      ibv_send_wr* bad = nullptr;
      if (int rc = ibv_post_send(qps[i].get(), &wr, &bad)) {
        *err = "ibv_post_send on QP #" + std::to_string(i) + ": " + strerror(rc);
        return false;
      }
    }
    return true;
  }

  /// kQps completions on `cq`, exactly one per QP, each as `check` wants;
  /// then nothing more. "" if so.
  template <class Check>
  std::string collect(ibv_cq* cq, const char* what, Check check) {
    std::vector<ibv_wc> wcs = poll_n(cq, kQps, kPhaseMs);
    if (wcs.size() != size_t(kQps)) {
      return std::string(what) + ": " + std::to_string(wcs.size()) + " of " + std::to_string(kQps) +
             " completions";
    }
    std::vector<bool> seen(kQps, false);
    for (const ibv_wc& wc : wcs) {
      auto it = index_of_qpn.find(wc.qp_num);
      if (wc.status != IBV_WC_SUCCESS || it == index_of_qpn.end() || wc.wr_id != uint64_t(it->second)) {
        return std::string(what) + ": unexpected " + wc_str(wc);
      }
      if (seen[it->second]) return std::string(what) + ": second completion " + wc_str(wc);
      seen[it->second] = true;
      std::string e = check(wc, it->second);
      if (!e.empty()) return std::string(what) + ": " + e;
    }
    std::vector<ibv_wc> extra = drain_cq(cq, 50);
    if (!extra.empty()) return std::string(what) + ": extra completion " + wc_str(extra[0]);
    return "";
  }

  std::string check_sends(int dir) {
    return collect(scq.get(), "send CQ", [](const ibv_wc& wc, int) -> std::string {
      return wc.opcode == IBV_WC_SEND ? "" : "opcode " + wc_str(wc);
    });
  }

  /// Receives of direction `dir` (sent by the peer): length and every byte.
  std::string check_recvs(int dir) {
    std::string e = collect(rcq.get(), "recv CQ", [&](const ibv_wc& wc, int i) -> std::string {
      if (wc.opcode != IBV_WC_RECV || wc.byte_len != msg_len(dir, i))
        return "QP #" + std::to_string(i) + " expected " + std::to_string(msg_len(dir, i)) +
               " bytes: " + wc_str(wc);
      const uint64_t off = kRecvArea + uint64_t(i) * kSlotBytes;
      mem.expect(off, msg_len(dir, i), msg_seed(dir, i));
      return "";
    });
    if (!e.empty()) return e;
    return mem.verify();
  }

  /// A CQ overrun would raise IBV_EVENT_CQ_ERR: none may be pending.
  std::string check_no_async_event() {
    pollfd p{dev.ctx->async_fd, POLLIN, 0};
    if (poll(&p, 1, 0) != 1) return "";
    ibv_async_event ev;
    if (ibv_get_async_event(dev.ctx.get(), &ev) != 0) return "";
    std::string e = std::string("unexpected async event ") + ibv_event_type_str(ev.event_type);
    ibv_ack_async_event(&ev);
    return e;
  }

  /// Destroys every QP, then the CQs and the MR, checking each call.
  std::string teardown() {
    for (int i = 0; i < kQps; ++i) {
      if (int rc = ibv_destroy_qp(qps[i].release()))
        return "ibv_destroy_qp #" + std::to_string(i) + ": " + strerror(rc);
    }
    if (int rc = ibv_destroy_cq(scq.release())) return std::string("ibv_destroy_cq: ") + strerror(rc);
    if (int rc = ibv_destroy_cq(rcq.release())) return std::string("ibv_destroy_cq: ") + strerror(rc);
    if (int rc = ibv_dereg_mr(mr.release())) return std::string("ibv_dereg_mr: ") + strerror(rc);
    return "";
  }
};

// The peer: direction 1 sends, direction 0 arrives. Steps follow the test body.
int peer_main(Channel& ch) {
  Side s;
  std::string err;
  if (!s.open(2, &err)) child_fail(__FILE__, __LINE__, err);
  const SideInfo mine = s.info();
  CHILD_CHECK(ch.send_pod(mine), "send info: " + ch.error());
  SideInfo theirs;
  CHILD_CHECK(ch.recv_pod(&theirs), "recv info: " + ch.error());
  CHILD_CHECK(s.connect_all(theirs, &err), err);
  CHILD_CHECK(ch.send_pod(int32_t(1)), "send ready");
  int32_t go = 0;
  CHILD_CHECK(ch.recv_pod(&go), "recv go: " + ch.error());
  CHILD_CHECK(s.send_all(1, &err), err);
  // Both sides have posted every send before either polls: each CQ then holds
  // all kQps of its completions at once.
  CHILD_CHECK(ch.send_pod(int32_t(1)), "send posted");
  int32_t posted = 0;
  CHILD_CHECK(ch.recv_pod(&posted, kPhaseMs), "recv posted: " + ch.error());
  std::string e = s.check_sends(1);
  if (e.empty()) e = s.check_recvs(0);
  if (e.empty()) e = s.check_no_async_event();
  Report r;
  r.ok = e.empty();
  snprintf(r.msg, sizeof(r.msg), "%s", e.c_str());
  CHILD_CHECK(ch.send_pod(r), "send report");
  int32_t down = 0;
  CHILD_CHECK(ch.recv_pod(&down), "recv teardown: " + ch.error());
  e = s.teardown();
  r.ok = e.empty();
  snprintf(r.msg, sizeof(r.msg), "%s", e.c_str());
  CHILD_CHECK(ch.send_pod(r), "send teardown report");
  return 0;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

TEST(ManyQpsTest, ThousandRcPairsOnSharedCqsEachCarryOneSendBothWays) {
  auto peer = PeerProcess::spawn(peer_main);
  ASSERT_TRUE(peer);
  Channel& ch = peer->chan();
  const auto t0 = std::chrono::steady_clock::now();

  Side s;
  std::string err;
  ASSERT_TRUE(s.open(1, &err)) << err;
  const double create_ms = ms_since(t0);
  SideInfo theirs;
  ASSERT_TRUE(ch.recv_pod(&theirs, kPhaseMs)) << ch.error();
  const SideInfo mine = s.info();
  ASSERT_TRUE(ch.send_pod(mine)) << ch.error();
  const auto t_connect = std::chrono::steady_clock::now();
  ASSERT_TRUE(s.connect_all(theirs, &err)) << err;
  int32_t ready = 0;
  ASSERT_TRUE(ch.recv_pod(&ready, kPhaseMs)) << ch.error();
  const double connect_ms = ms_since(t_connect);

  // Expect: 1,000 sends each way, every completion once on the right QP, every byte placed.
  const auto t_data = std::chrono::steady_clock::now();
  ASSERT_TRUE(ch.send_pod(int32_t(1)));
  ASSERT_TRUE(s.send_all(0, &err)) << err;
  int32_t posted = 0;
  ASSERT_TRUE(ch.recv_pod(&posted, kPhaseMs)) << ch.error();
  ASSERT_TRUE(ch.send_pod(int32_t(1)));
  EXPECT_EQ(s.check_sends(0), "");
  EXPECT_EQ(s.check_recvs(1), "");
  EXPECT_EQ(s.check_no_async_event(), "");
  Report r;
  ASSERT_TRUE(ch.recv_pod(&r, kPhaseMs)) << ch.error();
  EXPECT_TRUE(r.ok) << "peer: " << r.msg;
  const double data_ms = ms_since(t_data);

  // Expect: every destroy succeeds on both sides, and the peer exits cleanly.
  const auto t_down = std::chrono::steady_clock::now();
  ASSERT_TRUE(ch.send_pod(int32_t(1)));
  EXPECT_EQ(s.teardown(), "");
  ASSERT_TRUE(ch.recv_pod(&r, kPhaseMs)) << ch.error();
  EXPECT_TRUE(r.ok) << "peer teardown: " << r.msg;
  EXPECT_EQ(peer->wait_exit(), 0);
  printf("1000 QP pairs: create+reg %.0f ms, connect %.0f ms, data %.0f ms, teardown %.0f ms\n", create_ms,
         connect_ms, data_ms, ms_since(t_down));
}

}  // namespace
}  // namespace uroce::test
