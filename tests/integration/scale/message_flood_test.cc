// 10^6 small RC SENDs through one QP between two processes. The sender (a
// child) keeps up to a full send queue of requests outstanding, signals one
// request in kSignalEvery and alternates inline and gathered payloads; the
// receiver (this process) keeps kRecvDepth receives posted and reposts each
// buffer as soon as it has checked it. Every message carries its sequence
// number and pattern bytes derived from it, and each receive buffer is
// larger than a message, so a lost, duplicated, reordered, corrupted or
// overlong message fails at the first one. When the receiver falls behind,
// the sender meets RNR and must retry without losing order.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "support/verbs_harness.h"

namespace uroce::test {
namespace {

constexpr uint64_t kMessages = 1000000;
constexpr uint32_t kMsgBytes = 64;
constexpr uint32_t kWindow = 128;         // sender: max_send_wr, all of it used
constexpr uint32_t kSignalEvery = 16;     // sender: one signaled request per 16
constexpr uint32_t kRecvDepth = 256;      // receiver: receives kept posted
constexpr uint32_t kRecvSlotBytes = 128;  // message + guard bytes that must stay untouched
constexpr uint32_t kPayloadSeed = 0x600d;
constexpr uint32_t kSenderBg = 7, kReceiverBg = 8;
/// The whole run must end well inside the ctest TIMEOUT (180 s).
constexpr int kRunMs = 150000;
constexpr unsigned kSenderLifetimeS = 170;
static_assert(kMessages % kSignalEvery == 0, "the last request must be signaled");

struct SenderReport {
  int32_t ok = 0;
  char msg[240] = {};
};

/// Message `seq`: its sequence number, then pattern bytes that depend on it.
void build_message(uint8_t* p, uint64_t seq) {
  memcpy(p, &seq, 8);
  fill_pattern(p + 8, kMsgBytes - 8, kPayloadSeed, seq * kMsgBytes + 8);
}

uint64_t mono_ms() {
  return uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

std::string run_sender(LocalEnd& e) {
  uint64_t posted = 0, retired = 0;
  uint64_t last_progress = mono_ms();
  const uint64_t deadline = last_progress + kRunMs;
  while (retired < kMessages) {
    // Fill the send queue. A source slot is reused only after the request
    // that used it has completed (kWindow slots, at most kWindow outstanding).
    while (posted < kMessages && posted - retired < kWindow) {
      const uint64_t off = (posted % kWindow) * kMsgBytes;
      build_message(e.mem.data() + off, posted);
      ibv_sge sg = e.sge(off, kMsgBytes);
      ibv_send_wr wr;
      memset(&wr, 0, sizeof(wr));
      wr.wr_id = posted;
      wr.opcode = IBV_WR_SEND;
      wr.sg_list = &sg;
      wr.num_sge = 1;
      wr.send_flags = (posted % kSignalEvery == kSignalEvery - 1 ? IBV_SEND_SIGNALED : 0) |
                      (posted & 1 ? IBV_SEND_INLINE : 0);
      ibv_send_wr* bad = nullptr;
      if (int rc = ibv_post_send(e.qp.get(), &wr, &bad))
        return "ibv_post_send #" + std::to_string(posted) + ": " + strerror(rc);
      ++posted;
    }
    ibv_wc wc[kWindow / kSignalEvery];
    const int n = ibv_poll_cq(e.scq.get(), int(kWindow / kSignalEvery), wc);
    if (n < 0) return "ibv_poll_cq failed";
    for (int i = 0; i < n; ++i) {
      // One signaled completion retires itself and the unsignaled ones before it.
      const uint64_t want = retired + kSignalEvery - 1;
      if (wc[i].status != IBV_WC_SUCCESS || wc[i].opcode != IBV_WC_SEND || wc[i].wr_id != want)
        return "send completion " + wc_str(wc[i]) + ", expected wr_id " + std::to_string(want);
      retired += kSignalEvery;
    }
    const uint64_t now = n > 0 ? (last_progress = mono_ms()) : mono_ms();
    if (now - last_progress > uint64_t(kWaitMs) || now > deadline) {
      return "stuck: " + std::to_string(posted) + " posted, " + std::to_string(retired) + " completed";
    }
    if (n == 0) sched_yield();  // two cores, two busy processes and a service thread
  }
  std::vector<ibv_wc> extra = drain_cq(e.scq.get(), 50);
  if (!extra.empty()) return "extra send completion " + wc_str(extra[0]);
  return "";
}

int sender_main(Channel& ch) {
  alarm(kSenderLifetimeS);  // longer than the harness default: this run is long
  EndConfig cfg;
  cfg.buf_bytes = 64 << 10;
  cfg.caps.max_send_wr = kWindow;
  cfg.caps.max_recv_wr = 1;
  cfg.caps.max_sge = 1;
  cfg.caps.max_inline = kMsgBytes;
  cfg.cqe = int(kWindow);
  cfg.bg_seed = kSenderBg;
  LocalEnd e;
  std::string err;
  if (!e.open(cfg, &err)) child_fail(__FILE__, __LINE__, err);
  CHILD_CHECK(ch.send_pod(e.info()), "send info: " + ch.error());
  WireInfo peer;
  CHILD_CHECK(ch.recv_pod(&peer), "recv peer info: " + ch.error());
  CHILD_CHECK(e.connect(peer, &err), err);
  int32_t go = 0;
  CHILD_CHECK(ch.recv_pod(&go), "recv go: " + ch.error());
  SenderReport r;
  std::string e_msg = run_sender(e);
  r.ok = e_msg.empty();
  snprintf(r.msg, sizeof(r.msg), "%s", e_msg.c_str());
  CHILD_CHECK(ch.send_pod(r), "send report");
  int32_t bye = 0;
  CHILD_CHECK(ch.recv_pod(&bye, kRunMs), "recv bye: " + ch.error());
  return 0;
}

class MessageFloodTest : public ::testing::Test {
 protected:
  int post_recv(uint32_t slot) {
    return local_.post_recv(slot, {local_.sge(uint64_t(slot) * kRecvSlotBytes, kRecvSlotBytes)});
  }

  /// Checks the completion of message `seq` and its buffer; "" if right.
  std::string check(const ibv_wc& wc, uint64_t seq) {
    const uint32_t slot = uint32_t(seq % kRecvDepth);  // receives complete in posting order
    if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV || wc.byte_len != kMsgBytes ||
        wc.wr_id != slot || wc.qp_num != local_.qp->qp_num)
      return "completion " + wc_str(wc) + ", expected wr_id " + std::to_string(slot);
    const uint64_t off = uint64_t(slot) * kRecvSlotBytes;
    const uint8_t* p = local_.mem.data() + off;
    uint64_t got;
    memcpy(&got, p, 8);
    if (got != seq) return "carries sequence number " + std::to_string(got);
    if (int64_t at = find_pattern_mismatch(p + 8, kMsgBytes - 8, kPayloadSeed, seq * kMsgBytes + 8); at >= 0)
      return "payload differs at byte " + std::to_string(at + 8);
    // What lies past the message was never written by anyone.
    if (int64_t at =
            find_pattern_mismatch(p + kMsgBytes, kRecvSlotBytes - kMsgBytes, kReceiverBg, off + kMsgBytes);
        at >= 0)
      return "guard byte " + std::to_string(at + kMsgBytes) + " of the buffer was overwritten";
    return "";
  }

  LocalEnd local_;
};

TEST_F(MessageFloodTest, MillionSendsThroughOneRcQpArriveOnceInOrderIntact) {
  EndConfig cfg;
  cfg.buf_bytes = size_t(kRecvDepth) * kRecvSlotBytes;
  cfg.caps.max_send_wr = 1;
  cfg.caps.max_recv_wr = kRecvDepth;
  cfg.caps.max_sge = 1;
  cfg.cqe = int(kRecvDepth);
  cfg.bg_seed = kReceiverBg;
  std::string err;
  ASSERT_TRUE(local_.open(cfg, &err)) << err;
  auto sender = PeerProcess::spawn(sender_main);
  ASSERT_TRUE(sender);
  Channel& ch = sender->chan();
  WireInfo theirs;
  ASSERT_TRUE(ch.recv_pod(&theirs)) << ch.error();
  ASSERT_TRUE(local_.connect(theirs, &err)) << err;
  for (uint32_t s = 0; s < kRecvDepth; ++s) ASSERT_EQ(post_recv(s), 0);
  ASSERT_TRUE(ch.send_pod(local_.info()));

  // Expect: messages 0 .. 10^6-1, each once, in order, every byte right.
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(ch.send_pod(int32_t(1)));
  uint64_t received = 0;
  std::string failure;
  uint64_t last_progress = mono_ms();
  const uint64_t deadline = last_progress + kRunMs;
  while (received < kMessages && failure.empty()) {
    ibv_wc wc[32];
    const int n = ibv_poll_cq(local_.rcq.get(), 32, wc);
    if (n < 0) {
      failure = "ibv_poll_cq failed";
      break;
    }
    for (int i = 0; i < n && failure.empty(); ++i) {
      failure = check(wc[i], received);
      if (!failure.empty()) {
        failure = "message " + std::to_string(received) + ": " + failure;
      } else if (int rc = post_recv(uint32_t(received % kRecvDepth))) {
        failure = "ibv_post_recv: " + std::string(strerror(rc));
      }
      ++received;
    }
    const uint64_t now = n > 0 ? (last_progress = mono_ms()) : mono_ms();
    if (now - last_progress > uint64_t(kWaitMs) || now > deadline)
      failure = "stuck after " + std::to_string(received) + " messages";
    if (n == 0) sched_yield();
  }
  if (!failure.empty()) {
    // What the sender saw, if it has said anything yet (bounded wait).
    SenderReport r;
    if (ch.recv_pod(&r, 2000)) failure += std::string("; sender: ") + (r.ok ? "ok" : r.msg);
  }
  ASSERT_EQ(failure, "");
  ASSERT_EQ(received, kMessages);
  const double run_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  SenderReport r;
  ASSERT_TRUE(ch.recv_pod(&r, kRunMs)) << ch.error();
  EXPECT_TRUE(r.ok) << "sender: " << r.msg;
  // Expect: nothing after the last message.
  std::vector<ibv_wc> extra = drain_cq(local_.rcq.get(), 100);
  EXPECT_TRUE(extra.empty()) << "extra receive " << wc_str(extra[0]);
  ASSERT_TRUE(ch.send_pod(int32_t(1)));
  EXPECT_EQ(sender->wait_exit(), 0);
  printf("%llu x %u B SENDs through one RC QP: %.0f ms (%.2f M msgs/s)\n", (unsigned long long)kMessages,
         kMsgBytes, run_ms, double(kMessages) / run_ms / 1000.0);
}

}  // namespace
}  // namespace uroce::test
