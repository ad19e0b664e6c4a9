// A single-producer single-consumer ring of datagrams in shared memory:
// how uroced hands a RoCE v2 packet it received on a host's port 4791 to the
// process owning the packet's destination QP (docs/network-link.md,
// "Demultiplexing"). Records are variable-sized and cache-line aligned; a
// record that would straddle the end is preceded by a padding record. When
// the ring is full the packet is dropped and counted — a lost packet, which
// RC recovers — rather than blocking the daemon.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace uroce::core {

struct alignas(64) PacketRing {
  alignas(64) std::atomic<uint64_t> tail;  // producer: bytes written (release)
  uint64_t head_seen;                      // producer's private copy of head
  uint64_t dropped;                        // producer: packets that did not fit
  alignas(64) std::atomic<uint64_t> head;  // consumer: bytes consumed (release)
  alignas(64) uint64_t size;               // data bytes, a power of two
  uint64_t data_off;                       // offset of the data from this struct
};

/// One record: its header, then `len` bytes, padded to 64.
struct PacketRecord {
  uint32_t len;     // payload bytes; kPad: skip to the end of the ring
  uint32_t src_ip;  // network order
  uint16_t src_port;
  uint16_t pad16;
  uint32_t pad32;
};
constexpr uint32_t kPacketPad = 0xffffffffu;
constexpr uint64_t kPacketAlign = 64;

inline uint64_t packet_record_bytes(size_t len) {
  return (sizeof(PacketRecord) + len + kPacketAlign - 1) & ~(kPacketAlign - 1);
}

/// Initialises a ring whose data (`size` bytes, a power of two >= 4096)
/// follows at `data_off` bytes from `r`.
inline void packet_ring_init(PacketRing* r, uint64_t size, uint64_t data_off) {
  r->tail.store(0, std::memory_order_relaxed);
  r->head.store(0, std::memory_order_relaxed);
  r->head_seen = 0;
  r->dropped = 0;
  r->size = size;
  r->data_off = data_off;
}

inline uint8_t* packet_ring_data(PacketRing* r) { return reinterpret_cast<uint8_t*>(r) + r->data_off; }

/// Producer: appends one packet; false (and counted) if it does not fit now.
inline bool packet_ring_put(PacketRing* r, std::span<const uint8_t> pkt, uint32_t src_ip, uint16_t src_port) {
  const uint64_t need = packet_record_bytes(pkt.size());
  if (need > r->size / 2) {
    ++r->dropped;
    return false;
  }
  uint64_t t = r->tail.load(std::memory_order_relaxed);
  const uint64_t to_end = r->size - (t & (r->size - 1));
  const uint64_t total = need <= to_end ? need : to_end + need;  // a padding record first if it wraps
  if (t + total - r->head_seen > r->size) {
    r->head_seen = r->head.load(std::memory_order_acquire);  // pairs with packet_ring_get's release
    if (t + total - r->head_seen > r->size) {
      ++r->dropped;
      return false;
    }
  }
  uint8_t* data = packet_ring_data(r);
  if (need > to_end) {
    PacketRecord pad{kPacketPad, 0, 0, 0, 0};
    memcpy(data + (t & (r->size - 1)), &pad, sizeof(pad));
    t += to_end;
  }
  PacketRecord h{uint32_t(pkt.size()), src_ip, src_port, 0, 0};
  uint8_t* at = data + (t & (r->size - 1));
  memcpy(at, &h, sizeof(h));
  if (!pkt.empty()) memcpy(at + sizeof(h), pkt.data(), pkt.size());
  r->tail.store(t + need, std::memory_order_release);  // pairs with packet_ring_get's acquire
  return true;
}

/// Consumer: hands the oldest packet to `take(bytes, src_ip, src_port)` and
/// releases it; false if the ring is empty.
template <typename Take>
inline bool packet_ring_get(PacketRing* r, Take&& take) {
  uint64_t h = r->head.load(std::memory_order_relaxed);
  const uint64_t t = r->tail.load(std::memory_order_acquire);  // pairs with packet_ring_put's release
  if (h == t) return false;
  uint8_t* data = packet_ring_data(r);
  PacketRecord rec;
  memcpy(&rec, data + (h & (r->size - 1)), sizeof(rec));
  if (rec.len == kPacketPad) {
    h += r->size - (h & (r->size - 1));
    memcpy(&rec, data + (h & (r->size - 1)), sizeof(rec));
  }
  take(std::span<const uint8_t>(data + (h & (r->size - 1)) + sizeof(rec), rec.len), rec.src_ip, rec.src_port);
  r->head.store(h + packet_record_bytes(rec.len), std::memory_order_release);
  return true;
}

}  // namespace uroce::core
