// One AF_XDP socket (XSK) with its packet memory: the kernel-bypass half of
// the AF_XDP link. Frames arrive from the interface's queue into the packet
// memory (UMEM) and are announced on the RX ring; frames written into the
// UMEM and put on the TX ring leave through the interface. The ring
// operations are libxdp's (xdp/xsk.h); setting the socket up is done here
// because it starts from a socket another process made: creating an AF_XDP
// socket needs CAP_NET_RAW, which uroced has and applications do not, while
// everything after (memory, rings, bind, receiving, sending) needs nothing
// on a descriptor one holds (../shared/research/afxdp.md).
//
// Copy mode (what veth and generic XDP give): transmitting needs a sendto()
// "kick" per batch; receiving needs no system call.
#pragma once

#include <xdp/xsk.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/fn_ref.h"
#include "common/status.h"

namespace uroce::link {

class XskSocket {
 public:
  struct Options {
    // Frames of the packet memory: half wait in the fill ring for what
    // arrives, half are for sending. A frame holds one Ethernet frame: with
    // 4096-byte frames up to 4096 - 256 bytes (the kernel keeps headroom),
    // which a RoCE MTU of 2048 fits.
    uint32_t frames = 1024;
    uint32_t frame_size = 4096;
    uint32_t ring_size = 512;  // each of the four rings (a power of two)
  };
  /// Takes AF_XDP socket `fd` (not yet bound; this object owns it from now
  /// on, also on error): registers packet memory of its own, sets up the
  /// rings and binds the socket to queue `queue` of interface `ifindex`
  /// (copy mode). The packet memory is locked and counts against
  /// RLIMIT_MEMLOCK (ENOBUFS past it).
  static Result<std::unique_ptr<XskSocket>> bind(int fd, int ifindex, uint32_t queue, const Options& o);
  /// bind() with a socket of one's own: needs CAP_NET_RAW (tests, bench).
  static Result<std::unique_ptr<XskSocket>> open(int ifindex, uint32_t queue, const Options& o);
  ~XskSocket();
  XskSocket(const XskSocket&) = delete;
  XskSocket& operator=(const XskSocket&) = delete;

  using OnFrame = FnRef<void(std::span<const uint8_t> frame)>;
  /// Hands up to `max` received frames to `on_frame` (each valid only during
  /// its call) and gives their memory back to the kernel. Never blocks.
  int receive(OnFrame on_frame, int max = 64);
  /// A frame to write an outgoing Ethernet frame into (frame_size - 256 bytes
  /// at most), or an empty span when every send frame is in flight (after
  /// reaping the kernel's completions).
  std::span<uint8_t> tx_frame();
  /// Queues the frame tx_frame() returned, `len` bytes of it.
  void tx_commit(size_t len);
  /// Hands the queued frames to the kernel (a sendto() kick when any).
  void flush();
  /// Frames on the TX ring the kernel has not taken (it stops at a busy
  /// driver queue): the next flush kicks again.
  uint32_t unkicked() const { return queued_; }
  /// The longest frame one frame of packet memory carries.
  size_t max_frame() const { return frame_size_ - kHeadroom; }
  int fd() const { return fd_; }
  /// Frames the kernel dropped for want of room in the RX ring or of
  /// buffers in the fill ring (XDP_STATISTICS).
  uint64_t dropped() const;

 private:
  static constexpr uint32_t kHeadroom = 256;  // XDP_PACKET_HEADROOM
  XskSocket() = default;
  Status setup(int ifindex, uint32_t queue, const Options& o);
  void reap_completions();
  void kick();

  int fd_ = -1;
  uint8_t* umem_ = nullptr;
  size_t umem_size_ = 0;
  uint32_t frame_size_ = 0;
  uint32_t ring_size_ = 0;
  // The rings as libxdp's inline helpers want them; their memory is mapped
  // from the socket (map_ring).
  xsk_ring_prod fill_{}, tx_{};
  xsk_ring_cons comp_{}, rx_{};
  struct Mapping {
    void* at = nullptr;
    size_t len = 0;
  };
  Mapping maps_[4];
  std::vector<uint64_t> free_tx_;   // send frames not in flight (UMEM offsets)
  uint64_t reserved_ = UINT64_MAX;  // the frame tx_frame() handed out
  uint32_t queued_ = 0;             // frames on the TX ring not yet kicked
};

}  // namespace uroce::link
