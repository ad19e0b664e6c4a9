// The AF_XDP link's frames (docs/afxdp-link.md): RoCE v2 packets written
// as whole Ethernet frames into an AF_XDP socket (link/xsk.h) and read back
// from it. uroce writes every header itself: the IP and UDP headers Linux
// would write for the UDP-socket link (link/udp_link.h: DF, identification
// 0, so a peer on UDP sockets believes them as it believes Linux's), and
// the ICRC over exactly those bytes. A received frame's ICRC is checked
// over the headers as received: nothing is guessed. The fault injector
// (UROCE_FAULTS) and the capture (UROCE_CAPTURE) see the same packets as on
// the UDP-socket link.
//
// One port per process and interface; its QPs send from any thread (a lock
// guards the send ring), the engine receives.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "common/counted.h"
#include "common/spin_lock.h"
#include "common/status.h"
#include "link/fault_injector.h"
#include "link/udp_link.h"
#include "link/xsk.h"
#include "wire/icrc.h"
#include "wire/packet.h"
#include "wire/pcap_writer.h"

namespace uroce::link {

class XdpPort final : public PacketSource {
 public:
  struct Options {
    uint8_t mac[6] = {};  // the interface's
    FaultConfig faults;
    std::shared_ptr<wire::PcapWriter> capture;
    /// Frames leave marked ECN-capable (ECT(0)); see UdpEndpoint::Options::ecn.
    bool ecn = false;
    /// Sees every received frame first; true: it was taken (a RAW_PACKET
    /// QP's flow rule claimed it) and is not a RoCE packet of this port's.
    std::function<bool(std::span<const uint8_t>)> raw;
    /// `raw` is asked only while this count (the process's flow rules) is
    /// not zero: RoCE-only processes pay one load per frame, not a call.
    const std::atomic<size_t>* raw_rules = nullptr;
  };
  struct Stats {
    uint64_t sent = 0, send_full = 0, received = 0, bad_icrc = 0, malformed = 0, not_roce = 0, cnp = 0;
    uint64_t gso_runs = 0;                        // frames that held a UDP GSO send's packets (on_gso_run)
    uint64_t sent_bytes = 0, received_bytes = 0;  // RoCE packets, BTH to ICRC
    uint64_t raw_sent = 0, raw_received = 0;      // whole frames of RAW_PACKET QPs (send_frame, Options::raw)
  };
  /// What one QP moved through the port (NetCounters::xdp; the port's
  /// own Stats cover every QP's frames and the frames no QP got).
  struct QpStats {
    uint64_t sent = 0, sent_bytes = 0, send_full = 0, received = 0, received_bytes = 0;
  };
  using OnPacket = UdpEndpoint::OnPacket;

  XdpPort(std::unique_ptr<XskSocket> xsk, const Options& o);
  XdpPort(const XdpPort&) = delete;
  XdpPort& operator=(const XdpPort&) = delete;

  /// Encodes `p` (bth.pad is set) into a frame from `from` to `to` (its port
  /// is normally 4791) for the neighbour `dst_mac`, and queues it; flush()
  /// hands the queue to the kernel. EAGAIN when every send frame is in
  /// flight (counted; the transport's retransmission covers it, as a full
  /// socket buffer's drop does). Counted into `qs` too when given.
  Status send(wire::Packet& p, const UdpAddr& from, const UdpAddr& to, const uint8_t dst_mac[6],
              QpStats* qs = nullptr);
  /// Queues a whole Ethernet frame as it is (a RAW_PACKET QP's SEND);
  /// EAGAIN when every send frame is in flight, EMSGSIZE when it does not
  /// fit one. It leaves at the next flush().
  Status send_frame(std::span<const uint8_t> frame);
  /// Frames queued by send_frame, or left on the ring by a kick the kernel
  /// cut short, wait for a flush() at `now` (ns). After a flush the kernel
  /// took none from (an interface down, a stalled driver queue) they wait a
  /// back-off first (10 us doubling to 10 ms), not a system call per poll.
  static constexpr uint64_t kRetryMinNs = 10'000, kRetryMaxNs = 10'000'000;
  bool tx_pending(uint64_t now) const {
    return tx_pending_.load(std::memory_order_relaxed) && now >= retry_ns_.load(std::memory_order_relaxed);
  }
  /// Sends what send() and send_frame() queued (one system call: copy mode's kick).
  void flush();
  /// Sends a packet the fault injector still holds back (call when idle).
  void flush_faults();
  /// Hands the RoCE packets among up to `max` received frames, whose ICRC
  /// and headers check out, to `on_packet`; never blocks. `more`: the read
  /// was full.
  int poll(OnPacket on_packet, int max = 64, bool* more = nullptr) override;
  int fd() const override { return xsk_->fd(); }
  const Stats& stats() const { return stats_.get(); }
  /// Frames the kernel dropped for want of room in the rings (XskSocket::dropped).
  uint64_t ring_dropped() const { return xsk_->dropped(); }
  /// Counts into `s` (e.g. shared memory uroced reads) from now on.
  void count_into(Stats* s) { stats_.use(s); }

 private:
  /// Writes the frame of `ib` (BTH .. ICRC, ICRC included) into the socket's next send frame.
  Status emit(std::span<const uint8_t> ib, const UdpAddr& from, const UdpAddr& to, const uint8_t dst_mac[6]);
  void on_frame(std::span<const uint8_t> f, OnPacket on_packet);
  /// A frame whose ICRC failed may be a UDP GSO send a veth carried whole
  /// (its checksum offload on, Linux's default): a run of packets of one
  /// size (the last shorter), each sealed for its own IP header. Hands on
  /// its packets and returns true if it is one (its first packet's ICRC
  /// fits a size); `id`: the frame's IPv4 identification.
  bool on_gso_run(std::span<const uint8_t> ib, const UdpAddr& src, const UdpAddr& dst, uint16_t id,
                  uint8_t tos, bool ce, OnPacket on_packet);
  /// The most bytes on_gso_run reads looking for a run's packet size.
  static constexpr size_t kGsoSearchBytes = 256 * 1024;

  std::unique_ptr<XskSocket> xsk_;
  Options opt_;
  SpinLock tx_mu_;  // the send ring, the ICRC cache, the fault injector
  wire::Ipv4Icrc tx_icrc_, rx_icrc_;
  std::unique_ptr<FaultInjector> faults_;
  // Where the fault injector's held packets go: its tag is an index here.
  struct Dest {
    UdpAddr from, to;
    uint8_t mac[6];
  };
  std::vector<Dest> dests_;
  uint64_t tag_of(const UdpAddr& from, const UdpAddr& to, const uint8_t mac[6]);
  FaultInjector::Emit emit_tagged();
  std::vector<uint8_t> tx_;
  std::atomic<bool> tx_pending_{false};  // send_frame queued, flush not yet
  std::atomic<uint64_t> retry_ns_{0};    // tx_pending's back-off (flush)
  uint64_t stall_ns_ = 0;                // the back-off now (under tx_mu_)
  Counted<Stats> stats_;
};

}  // namespace uroce::link
