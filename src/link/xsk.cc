#include "link/xsk.h"

#include <linux/if_xdp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "common/clock.h"

#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef SOL_XDP
#define SOL_XDP 283
#endif

namespace uroce::link {

namespace {

/// Maps one of the socket's rings and points `r` (libxdp's ring) at it.
/// libxdp makes its rings only for sockets it creates itself, so the fields
/// its inline helpers use are set here, as its xsk.c sets them: a producer
/// ring's cached_cons starts a ring ahead (free space = cached_cons - cached_prod).
template <typename Ring>
Status map_ring(int fd, const xdp_ring_offset& off, uint32_t n, size_t desc_size, off_t pgoff, bool producer,
                Ring* r, void** at, size_t* len) {
  *len = off.desc + n * desc_size;
  void* m = mmap(nullptr, *len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, pgoff);
  if (m == MAP_FAILED) return Status(errno);
  *at = m;
  auto* base = static_cast<uint8_t*>(m);
  r->mask = n - 1;
  r->size = n;
  r->producer = reinterpret_cast<uint32_t*>(base + off.producer);
  r->consumer = reinterpret_cast<uint32_t*>(base + off.consumer);
  r->flags = reinterpret_cast<uint32_t*>(base + off.flags);
  r->ring = base + off.desc;
  r->cached_prod = *r->producer;
  r->cached_cons = producer ? *r->consumer + n : *r->consumer;
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<XskSocket>> XskSocket::bind(int fd, int ifindex, uint32_t queue, const Options& o) {
  std::unique_ptr<XskSocket> s(new XskSocket());
  s->fd_ = fd;
  if (Status st = s->setup(ifindex, queue, o); !st.is_ok()) return st;
  return s;
}

Result<std::unique_ptr<XskSocket>> XskSocket::open(int ifindex, uint32_t queue, const Options& o) {
  const int fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status(errno);
  return bind(fd, ifindex, queue, o);
}

Status XskSocket::setup(int ifindex, uint32_t queue, const Options& o) {
  const uint32_t n = o.ring_size;
  if (n == 0 || (n & (n - 1)) || o.frames < 2 * n || o.frame_size < 2048 ||
      (o.frame_size & (o.frame_size - 1)))
    return Status(EINVAL);
  frame_size_ = o.frame_size;
  ring_size_ = n;
  umem_size_ = size_t(o.frames) * o.frame_size;
  void* mem =
      mmap(nullptr, umem_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (mem == MAP_FAILED) return Status(errno);
  umem_ = static_cast<uint8_t*>(mem);
  xdp_umem_reg reg{};
  reg.addr = uint64_t(uintptr_t(umem_));
  reg.len = umem_size_;
  reg.chunk_size = o.frame_size;
  reg.headroom = 0;
  if (setsockopt(fd_, SOL_XDP, XDP_UMEM_REG, &reg, sizeof(reg)) != 0) return Status(errno);
  for (int opt : {XDP_UMEM_FILL_RING, XDP_UMEM_COMPLETION_RING, XDP_RX_RING, XDP_TX_RING})
    if (setsockopt(fd_, SOL_XDP, opt, &n, sizeof(n)) != 0) return Status(errno);
  xdp_mmap_offsets off{};
  socklen_t ol = sizeof(off);
  if (getsockopt(fd_, SOL_XDP, XDP_MMAP_OFFSETS, &off, &ol) != 0) return Status(errno);
  Status st = map_ring(fd_, off.fr, n, sizeof(uint64_t), off_t(XDP_UMEM_PGOFF_FILL_RING), true, &fill_,
                       &maps_[0].at, &maps_[0].len);
  if (st.is_ok())
    st = map_ring(fd_, off.cr, n, sizeof(uint64_t), off_t(XDP_UMEM_PGOFF_COMPLETION_RING), false, &comp_,
                  &maps_[1].at, &maps_[1].len);
  if (st.is_ok())
    st = map_ring(fd_, off.rx, n, sizeof(xdp_desc), off_t(XDP_PGOFF_RX_RING), false, &rx_, &maps_[2].at,
                  &maps_[2].len);
  if (st.is_ok())
    st = map_ring(fd_, off.tx, n, sizeof(xdp_desc), off_t(XDP_PGOFF_TX_RING), true, &tx_, &maps_[3].at,
                  &maps_[3].len);
  if (!st.is_ok()) return st;
  // The first half of the frames receive (all of them wait in the fill
  // ring from the start), the second half send.
  const uint32_t rx_frames = o.frames / 2;
  uint32_t idx = 0;
  const uint32_t fill = rx_frames < n ? rx_frames : n;
  if (xsk_ring_prod__reserve(&fill_, fill, &idx) != fill) return Status(EIO);
  for (uint32_t i = 0; i < fill; ++i) *xsk_ring_prod__fill_addr(&fill_, idx + i) = uint64_t(i) * o.frame_size;
  xsk_ring_prod__submit(&fill_, fill);
  for (uint32_t i = o.frames; i-- > rx_frames;) free_tx_.push_back(uint64_t(i) * o.frame_size);
  sockaddr_xdp sa{};
  sa.sxdp_family = AF_XDP;
  sa.sxdp_ifindex = uint32_t(ifindex);
  sa.sxdp_queue_id = queue;
  sa.sxdp_flags = XDP_COPY;
  // A queue whose previous socket just closed stays busy for a while (the
  // kernel releases it in deferred work: ~28 ms measured on an idle host;
  // 200 ms was once too short in ctest -j2 beside a busy loop, with network
  // namespaces being torn down): retry, for at most kBindWaitNs.
  constexpr uint64_t kBindWaitNs = 2'000'000'000;
  const uint64_t give_up = now_ns() + kBindWaitNs;
  for (;;) {
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) return Status::ok();
    if (errno != EBUSY || now_ns() > give_up) return Status(errno);
    usleep(5000);
  }
}

XskSocket::~XskSocket() {
  for (Mapping& m : maps_)
    if (m.at) munmap(m.at, m.len);
  if (fd_ >= 0) close(fd_);
  if (umem_) munmap(umem_, umem_size_);
}

int XskSocket::receive(OnFrame on_frame, int max) {
  uint32_t idx = 0;
  const uint32_t got = xsk_ring_cons__peek(&rx_, uint32_t(max), &idx);
  if (!got) return 0;
  // Each frame's memory goes back on the fill ring once it has been handled.
  uint32_t fidx = 0;
  while (xsk_ring_prod__reserve(&fill_, got, &fidx) != got) {
    // Cannot happen: the fill ring has room for every receive frame.
  }
  for (uint32_t i = 0; i < got; ++i) {
    const xdp_desc* d = xsk_ring_cons__rx_desc(&rx_, idx + i);
    on_frame(std::span<const uint8_t>(umem_ + d->addr, d->len));
    // In aligned mode the address may point past the chunk's start (headroom): the chunk goes back.
    *xsk_ring_prod__fill_addr(&fill_, fidx + i) = d->addr - d->addr % frame_size_;
  }
  xsk_ring_cons__release(&rx_, got);
  xsk_ring_prod__submit(&fill_, got);
  return int(got);
}

void XskSocket::reap_completions() {
  uint32_t idx = 0;
  const uint32_t done = xsk_ring_cons__peek(&comp_, comp_.size, &idx);
  for (uint32_t i = 0; i < done; ++i) free_tx_.push_back(*xsk_ring_cons__comp_addr(&comp_, idx + i));
  if (done) xsk_ring_cons__release(&comp_, done);
}

std::span<uint8_t> XskSocket::tx_frame() {
  if (free_tx_.empty()) reap_completions();
  if (free_tx_.empty() && queued_) {
    // Every send frame waits on the TX ring: hand them to the kernel now
    // (a burst longer than the ring would otherwise lose its tail).
    kick();
    reap_completions();
  }
  if (free_tx_.empty()) return {};
  reserved_ = free_tx_.back();
  return {umem_ + reserved_, max_frame()};
}

void XskSocket::tx_commit(size_t len) {
  uint32_t idx = 0;
  if (reserved_ == UINT64_MAX || xsk_ring_prod__reserve(&tx_, 1, &idx) != 1) return;
  free_tx_.pop_back();
  xdp_desc* d = xsk_ring_prod__tx_desc(&tx_, idx);
  d->addr = reserved_;
  d->len = uint32_t(len);
  d->options = 0;
  reserved_ = UINT64_MAX;
  xsk_ring_prod__submit(&tx_, 1);
  ++queued_;
}

void XskSocket::kick() {
  queued_ = 0;
  // Copy mode transmits only inside this call (the kernel copies the frames
  // into socket buffers and hands them to the driver), at most a budget of
  // them per call (32 on Linux 6.x), then EAGAIN: call again until the ring
  // is empty. A full driver queue (ENOBUFS) or another sender in the call
  // (EBUSY) leave the rest for the next kick.
  for (uint32_t calls = 0; calls <= ring_size_; ++calls) {
    if (sendto(fd_, nullptr, 0, MSG_DONTWAIT, nullptr, 0) >= 0) break;
    if (errno != EAGAIN && errno != EINTR) break;
  }
  // What the kernel left on the ring still needs a kick: the next flush's.
  queued_ = ring_size_ - xsk_prod_nb_free(&tx_, ring_size_);
}

void XskSocket::flush() {
  if (!queued_) return;
  kick();
  reap_completions();
}

uint64_t XskSocket::dropped() const {
  xdp_statistics st{};
  socklen_t l = sizeof(st);
  if (getsockopt(fd_, SOL_XDP, XDP_STATISTICS, &st, &l) != 0) return 0;
  return st.rx_dropped + st.rx_ring_full + st.rx_fill_ring_empty_descs;
}

}  // namespace uroce::link
