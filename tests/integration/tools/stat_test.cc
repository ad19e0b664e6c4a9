// `uroce stat`, `uroce res qp` and `uroce link` against live traffic: two
// agents (processes) with an RC QP each over the network link on uroce_lo
// (UROCE_LINK=udp), the sender's packets through uroce's fault injector
// (10 % dropped, 5 % with a byte corrupted). While both QPs live, the tool's
// JSON must show the losses where the protocol handles them: retransmissions
// and NAKs non-zero, and the receiver's bad-ICRC count equal to the
// corruptions the sender's injector made (every datagram on loopback
// arrives, and each corrupted one fails the ICRC check).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>
#include <thread>

#include "support/verbs_harness.h"

namespace uroce::test {
namespace {

std::string run_tool(const std::string& args) {
  const char* tool = getenv("UROCE_TOOL");
  if (!tool) return "";
  std::string out;
  FILE* f = popen((std::string(tool) + " " + args + " 2>&1").c_str(), "r");
  if (!f) return "";
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

/// The value of counter `name` in `uroce stat -j` output; -1 if absent.
long long counter(const std::string& json, const std::string& name) {
  std::smatch m;
  const std::regex re("\"" + std::regex_replace(name, std::regex("\\."), "\\.") + "\":([0-9]+)");
  return std::regex_search(json, m, re) ? std::stoll(m[1]) : -1;
}

TEST(UroceTool, CountersMoveByWhatTheFaultInjectorDid) {
  ASSERT_NE(getenv("UROCE_TOOL"), nullptr) << "set by CTest";
  EndConfig cfg;
  cfg.buf_bytes = 1u << 20;
  std::string err;
  // The injector's settings are read once per process: only the sender's.
  setenv("UROCE_FAULTS", "drop=0.1,corrupt=0.05,seed=7", 1);
  auto snd = Agent::start(cfg, &err);
  unsetenv("UROCE_FAULTS");
  ASSERT_TRUE(snd) << err;
  auto rcv = Agent::start(cfg, &err);
  ASSERT_TRUE(rcv) << err;
  ASSERT_TRUE(snd->connect(rcv->info())) << snd->error();
  ASSERT_TRUE(rcv->connect(snd->info())) << rcv->error();

  // Batches of writes of 16 packets each (at the 4 KiB path MTU): a lost
  // packet leaves a gap behind which the next ones arrive, which the
  // responder answers with a PSN sequence NAK.
  constexpr int kBatches = 8, kPerBatch = 8;
  constexpr uint32_t kLen = 64 << 10;
  for (int b = 0; b < kBatches; ++b) {
    for (int i = 0; i < kPerBatch; ++i) {
      AgentSend s;
      s.wr_id = uint64_t(b * kPerBatch + i);
      s.opcode = IBV_WR_RDMA_WRITE;
      s.sges = {{uint64_t(i) * kLen, kLen}};
      s.remote_addr = rcv->raddr(uint64_t(i) * kLen);
      s.rkey = rcv->rkey();
      ASSERT_EQ(snd->post_send(s), 0) << snd->error();
    }
    for (int i = 0; i < kPerBatch; ++i) {
      ibv_wc wc;
      ASSERT_EQ(snd->poll_send(&wc, 20000), 1) << snd->error();
      ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    }
  }

  const std::string s_args = "stat -j --qp " + std::to_string(snd->info().qpn);
  const std::string r_args = "stat -j --qp " + std::to_string(rcv->info().qpn);
  std::string sj, rj;
  // A corrupted retransmission sent just before the last ACK came may still
  // be in the receiver's socket: wait (bounded) until it has been read.
  for (int t = 0; t < 100; ++t) {
    sj = run_tool(s_args);
    rj = run_tool(r_args);
    if (counter(rj, "udp.bad_icrc") == counter(sj, "faults.corrupted")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  SCOPED_TRACE("sender: " + sj + "\nreceiver: " + rj);
  EXPECT_NE(sj.find("\"network\":true"), std::string::npos);
  EXPECT_GT(counter(sj, "faults.dropped"), 0);
  EXPECT_GT(counter(sj, "faults.corrupted"), 0);
  EXPECT_EQ(counter(rj, "udp.bad_icrc"), counter(sj, "faults.corrupted"));
  EXPECT_GT(counter(sj, "req.retransmits"), 0);
  EXPECT_GT(counter(rj, "resp.seq_naks"), 0);
  EXPECT_EQ(counter(sj, "req.seq_naks"), counter(rj, "resp.seq_naks"));  // ACKs are not faulted
  // What the requester sent went through the injector, and so did the
  // capability queries and answers (wire/caps_mad.h); what it let out left.
  EXPECT_EQ(counter(sj, "req.packets") + counter(sj, "req.caps_asked") + counter(sj, "resp.caps_answered"),
            counter(sj, "faults.in"));
  // Selective repeat: the sender learnt that its peer keeps packets past a
  // gap, resent holes alone, and the receiver replayed what it kept.
  EXPECT_EQ(counter(sj, "req.caps_selective"), 1);
  EXPECT_GT(counter(sj, "req.holes_resent"), 0);
  EXPECT_GT(counter(rj, "resp.ooo_replayed"), 0);
  EXPECT_EQ(counter(sj, "udp.sent"), counter(sj, "faults.out"));
  EXPECT_GE(counter(sj, "udp.sent_bytes"), (long long)kBatches * kPerBatch * kLen);
  EXPECT_EQ(counter(rj, "udp.received"), counter(sj, "faults.out"));  // every datagram sent arrived
  EXPECT_EQ(counter(sj, "udp.bad_icrc"), 0);
  // Congestion control: the sender timed its packets, lost some and cut
  // its window for it; its window now is at least one packet.
  EXPECT_GT(counter(sj, "cc.rtt_samples"), 0);
  EXPECT_GT(counter(sj, "cc.loss_cuts"), 0);
  EXPECT_GE(counter(sj, "cc_now.window"), 1);
  EXPECT_GT(counter(sj, "cc_now.srtt_ns"), 0);

  // The device's counters include both QPs' (and any QP that came before).
  const std::string dj = run_tool("stat -j uroce_lo");
  EXPECT_GE(counter(dj, "udp.bad_icrc"), counter(rj, "udp.bad_icrc")) << dj;
  EXPECT_GE(counter(dj, "req.retransmits"), counter(sj, "req.retransmits")) << dj;
  EXPECT_EQ(dj.find("cc_now."), std::string::npos) << "a device's totals hold no gauges: " << dj;

  const std::string qj = run_tool("res qp -j");
  for (uint32_t qpn : {snd->info().qpn, rcv->info().qpn}) {
    const std::regex re(
        "\\{\"dev\":\"uroce_lo\",\"qpn\":" + std::to_string(qpn) +
        ",\"pid\":[0-9]+,\"type\":\"RC\",\"state\":\"RTS\",\"dest_qpn\":[0-9]+,\"link\":\"udp\","
        "\"window\":[1-9][0-9]*,\"srtt_us\":[0-9.]+\\}");
    EXPECT_TRUE(std::regex_search(qj, re)) << "QP " << qpn << " in " << qj;
  }
  EXPECT_NE(qj.find("\"pid\":" + std::to_string(snd->proc().pid())), std::string::npos) << qj;

  const std::string lj = run_tool("link -j");
  EXPECT_NE(lj.find("\"dev\":\"uroce_lo\",\"ifname\":\"lo\""), std::string::npos) << lj;
  EXPECT_NE(lj.find("\"ip\":\"127.0.0.1\""), std::string::npos) << lj;
}

// `uroce res qp` names the link each QP really takes: the network link's
// QPs above say "udp"; two QPs of this host on the shared-memory link say
// "shm" (the AF_XDP link's "xdp": netns/xdp_reclaim.sh).
TEST(UroceTool, ResQpShowsTheSharedMemoryLink) {
  ASSERT_NE(getenv("UROCE_TOOL"), nullptr) << "set by CTest";
  EndConfig cfg;
  std::string err;
  unsetenv("UROCE_LINK");  // the agents choose as any program does: shared memory on one host
  auto a = Agent::start(cfg, &err);
  auto b = a ? Agent::start(cfg, &err) : nullptr;
  setenv("UROCE_LINK", "udp", 1);
  ASSERT_TRUE(a && b) << err;
  ASSERT_TRUE(a->connect(b->info())) << a->error();
  ASSERT_TRUE(b->connect(a->info())) << b->error();
  const std::string qj = run_tool("res qp -j");
  for (uint32_t qpn : {a->info().qpn, b->info().qpn}) {
    const std::regex re(
        "\\{\"dev\":\"uroce_lo\",\"qpn\":" + std::to_string(qpn) +
        ",\"pid\":[0-9]+,\"type\":\"RC\",\"state\":\"RTS\",\"dest_qpn\":[0-9]+,\"link\":\"shm\"\\}");
    EXPECT_TRUE(std::regex_search(qj, re)) << "QP " << qpn << " in " << qj;
  }
}

TEST(UroceTool, AnUnknownQpIsAnError) {
  EXPECT_NE(run_tool("stat --qp 1").find("no QP 1"), std::string::npos);
}

}  // namespace
}  // namespace uroce::test
