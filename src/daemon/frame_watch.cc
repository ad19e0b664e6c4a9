#include "daemon/frame_watch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/log.h"
#include "link/id_trust.h"
#include "wire/ip_udp.h"

namespace uroce::daemon {

namespace {

constexpr uint32_t kSnapBytes = 20 + 8 + 12;  // IPv4, UDP, BTH
constexpr int kBatch = 32;

// Classic BPF over what a SOCK_DGRAM packet socket sees: the IPv4 header first.
// Keep: an IPv4 frame arriving (not PACKET_OUTGOING), version 4 without
// options, UDP, not a fragment, destination port 4791, identification >= 64.
constexpr uint16_t kDrop = 15;
/// The jump offset from instruction `at` to kDrop.
constexpr uint8_t to_drop(int at) { return uint8_t(kDrop - at - 1); }
const sock_filter kFilter[] = {
    /* 0*/ BPF_STMT(BPF_LD | BPF_H | BPF_ABS, uint32_t(SKF_AD_OFF + SKF_AD_PROTOCOL)),
    /* 1*/ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IP, 0, to_drop(1)),
    /* 2*/ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, uint32_t(SKF_AD_OFF + SKF_AD_PKTTYPE)),
    /* 3*/ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PACKET_OUTGOING, to_drop(3), 0),
    /* 4*/ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 0),
    /* 5*/ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x45, 0, to_drop(5)),
    /* 6*/ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 9),
    /* 7*/ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, 0, to_drop(7)),
    /* 8*/ BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 6),
    /* 9*/ BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x3fff, to_drop(9), 0),
    /*10*/ BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 22),
    /*11*/ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, wire::kRoceV2Port, 0, to_drop(11)),
    /*12*/ BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 4),
    /*13*/ BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, link::IdTrust::kOwnIds, 0, to_drop(13)),
    /*14*/ BPF_STMT(BPF_RET | BPF_K, kSnapBytes),
    /*15*/ BPF_STMT(BPF_RET | BPF_K, 0),
};
#undef JUMP_TO_DROP
static_assert(sizeof(kFilter) / sizeof(kFilter[0]) == kDrop + 1);

uint32_t be24(const uint8_t* p) { return uint32_t(p[0]) << 16 | uint32_t(p[1]) << 8 | p[2]; }

}  // namespace

bool FrameWatch::start() {
  memfd_ = memfd_create("uroce-idwatch", MFD_CLOEXEC);
  if (memfd_ < 0 || ftruncate(memfd_, sizeof(link::IdWatchTable)) != 0) return false;
  void* p = mmap(nullptr, sizeof(link::IdWatchTable), PROT_READ | PROT_WRITE, MAP_SHARED, memfd_, 0);
  if (p == MAP_FAILED) return false;
  table_ = static_cast<link::IdWatchTable*>(p);
  table_->magic = link::IdWatchTable::kMagic;

  // Protocol 0 until the filter is on: nothing unfiltered gets queued.
  sock_ = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (sock_ < 0) {
    UROCE_INFO("uroced: no packet socket (%s): IPv4 identifications of other RoCE stacks are not watched",
               strerror(errno));
    return true;
  }
  sock_fprog prog{uint16_t(sizeof(kFilter) / sizeof(kFilter[0])), const_cast<sock_filter*>(kFilter)};
  const int buf = 4 << 20;
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  // ETH_P_ALL, not ETH_P_IP: a tap of every protocol sees a frame before
  // the IP stack does and is done with it (the filter says no) by the time
  // ip_rcv runs. A socket of ETH_P_IP shares the frame with ip_rcv instead,
  // which must then clone it (every datagram arriving on this host; perf,
  // ib_send_lat over lo).
  sll.sll_protocol = htons(ETH_P_ALL);
  if (setsockopt(sock_, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) != 0 ||
      bind(sock_, reinterpret_cast<sockaddr*>(&sll), sizeof(sll)) != 0) {
    UROCE_ERR("uroced: packet socket: %s; IPv4 identifications of other RoCE stacks are not watched",
              strerror(errno));
    close(sock_);
    sock_ = -1;
    return true;
  }
  (void)setsockopt(sock_, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
  // Outgoing frames are the filter's to drop too, but only after the kernel
  // cloned each one for this socket: every datagram this host sends (uroce's
  // own included) paid a clone and a free for nothing. With the option the
  // transmit path skips the socket (Linux 4.20; older kernels: the filter).
  const int one = 1;
  (void)setsockopt(sock_, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
  table_->watching.store(1, std::memory_order_release);  // pairs with IdTrust's acquire
  return true;
}

FrameWatch::~FrameWatch() {
  if (sock_ >= 0) close(sock_);
  if (table_) {
    table_->watching.store(0, std::memory_order_release);
    munmap(table_, sizeof(link::IdWatchTable));
  }
  if (memfd_ >= 0) close(memfd_);
}

int FrameWatch::client_fd() const {
  if (memfd_ < 0) return -1;
  // Read-only: a client can map the table but not write it.
  const std::string path = "/proc/self/fd/" + std::to_string(memfd_);
  return open(path.c_str(), O_RDONLY | O_CLOEXEC);
}

void FrameWatch::on_readable() {
  uint8_t bufs[kBatch][64];
  iovec iov[kBatch];
  mmsghdr msgs[kBatch];
  for (;;) {
    for (int i = 0; i < kBatch; ++i) {
      iov[i] = iovec{bufs[i], sizeof(bufs[i])};
      msgs[i] = mmsghdr{};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    const int n = recvmmsg(sock_, msgs, kBatch, MSG_DONTWAIT, nullptr);
    if (n <= 0) return;
    for (int i = 0; i < n; ++i) {
      if (msgs[i].msg_len < kSnapBytes) continue;
      const uint8_t* ip = bufs[i];
      link::IdKey k;
      memcpy(&k.saddr, ip + 12, 4);
      memcpy(&k.daddr, ip + 16, 4);
      k.sport = uint16_t(ip[20] << 8 | ip[21]);
      k.dqp = be24(ip + 28 + 5);
      k.psn = be24(ip + 28 + 9);
      link::id_watch_put(table_, k, uint16_t(ip[4] << 8 | ip[5]));
      ++recorded_;
    }
    if (n < kBatch) return;
  }
}

}  // namespace uroce::daemon
