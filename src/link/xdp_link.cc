#include "link/xdp_link.h"

#include <algorithm>
#include <cstring>
#include <ctime>

#include "common/clock.h"
#include "wire/ip_udp.h"

namespace uroce::link {

namespace {

constexpr size_t kEth = 14;
constexpr uint16_t kEtherIpv4 = 0x0800, kEtherIpv6 = 0x86dd;

uint16_t be16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }

uint64_t wall_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace

XdpPort::XdpPort(std::unique_ptr<XskSocket> xsk, const Options& o) : xsk_(std::move(xsk)), opt_(o) {
  if (o.faults.any()) faults_ = std::make_unique<FaultInjector>(o.faults);
}

uint64_t XdpPort::tag_of(const UdpAddr& from, const UdpAddr& to, const uint8_t mac[6]) {
  for (size_t i = 0; i < dests_.size(); ++i)
    if (same_addr(dests_[i].from, from) && same_addr(dests_[i].to, to) && memcmp(dests_[i].mac, mac, 6) == 0)
      return i;
  Dest d{from, to, {}};
  memcpy(d.mac, mac, 6);
  dests_.push_back(d);
  return dests_.size() - 1;
}

FaultInjector::Emit XdpPort::emit_tagged() {
  return [this](std::span<const uint8_t> ib, uint64_t tag) {
    if (tag < dests_.size()) (void)emit(ib, dests_[tag].from, dests_[tag].to, dests_[tag].mac);
  };
}

Status XdpPort::send(wire::Packet& p, const UdpAddr& from, const UdpAddr& to, const uint8_t dst_mac[6],
                     QpStats* qs) {
  const size_t n = wire::encoded_size(p);
  if (!n) return Status(EINVAL);
  std::lock_guard<SpinLock> g(tx_mu_);
  tx_.resize(n + wire::kIcrcBytes);
  if (wire::encode(p, tx_.data(), tx_.size()) != n) return Status(EINVAL);
  // The ICRC over the headers this frame will carry (identification 0).
  wire::put_icrc(tx_.data() + n, from.ip.is_v4()
                                     ? tx_icrc_.compute({from.ip.raw4(), to.ip.raw4(), from.port, to.port}, 0,
                                                        {tx_.data(), n})
                                     : icrc_v6(from, to, {tx_.data(), n}));
  if (qs) {
    ++qs->sent;
    qs->sent_bytes += tx_.size();
  }
  if (faults_) {
    faults_->process(tx_, emit_tagged(), tag_of(from, to, dst_mac));
    return Status::ok();
  }
  Status st = emit(tx_, from, to, dst_mac);
  if (qs && st.err() == EAGAIN) ++qs->send_full;
  return st;
}

Status XdpPort::emit(std::span<const uint8_t> ib, const UdpAddr& from, const UdpAddr& to,
                     const uint8_t dst_mac[6]) {
  std::span<uint8_t> f = xsk_->tx_frame();
  const size_t ip_udp = from.ip.is_v4() ? wire::kIpv4HeaderBytes + wire::kUdpHeaderBytes
                                        : wire::kIpv6HeaderBytes + wire::kUdpHeaderBytes;
  if (f.size() < kEth + ip_udp + ib.size()) {
    ++stats_->send_full;
    return Status(f.empty() ? EAGAIN : EMSGSIZE);
  }
  memcpy(f.data(), dst_mac, 6);
  memcpy(f.data() + 6, opt_.mac, 6);
  const uint16_t type = from.ip.is_v4() ? kEtherIpv4 : kEtherIpv6;
  f[12] = uint8_t(type >> 8);
  f[13] = uint8_t(type);
  // What Linux writes for the UDP-socket link, with the IPv4 header
  // checksum and, over IPv6, the UDP checksum (IPv4's UDP checksum is 0,
  // "none": a receiving kernel would drop a wrong one).
  const size_t hl =
      ip_udp_headers(from, to, ib.size(), f.data() + kEth, 0, ib.data(), opt_.ecn ? wire::kEcnEct0 : 0);
  memcpy(f.data() + kEth + hl, ib.data(), ib.size());
  xsk_->tx_commit(kEth + hl + ib.size());
  ++stats_->sent;
  stats_->sent_bytes += ib.size();
  if (opt_.capture) opt_.capture->write({f.data() + kEth, hl}, ib, wall_ns(), true);
  return Status::ok();
}

Status XdpPort::send_frame(std::span<const uint8_t> frame) {
  std::lock_guard<SpinLock> g(tx_mu_);
  std::span<uint8_t> f = xsk_->tx_frame();
  if (f.size() < frame.size()) {
    ++stats_->send_full;
    return Status(f.empty() ? EAGAIN : EMSGSIZE);
  }
  memcpy(f.data(), frame.data(), frame.size());
  xsk_->tx_commit(frame.size());
  tx_pending_.store(true, std::memory_order_relaxed);
  ++stats_->raw_sent;
  return Status::ok();
}

void XdpPort::flush() {
  std::lock_guard<SpinLock> g(tx_mu_);
  const uint32_t before = xsk_->unkicked();
  xsk_->flush();
  // Frames the kernel did not take yet (a busy driver queue) wait for the
  // next flush: an empty poll or the engine thread's look; if it took none
  // of them, after a back-off.
  const uint32_t left = xsk_->unkicked();
  if (left != 0 && left >= before) {
    stall_ns_ = std::clamp<uint64_t>(2 * stall_ns_, kRetryMinNs, kRetryMaxNs);
    retry_ns_.store(fast_now_ns() + stall_ns_, std::memory_order_relaxed);
  } else if (stall_ns_) {
    stall_ns_ = 0;
    retry_ns_.store(0, std::memory_order_relaxed);
  }
  tx_pending_.store(left != 0, std::memory_order_relaxed);
}

void XdpPort::flush_faults() {
  std::lock_guard<SpinLock> g(tx_mu_);
  if (faults_) faults_->flush(emit_tagged());
  xsk_->flush();
}

int XdpPort::poll(OnPacket on_packet, int max, bool* more) {
  const int n = xsk_->receive([&](std::span<const uint8_t> f) { on_frame(f, on_packet); }, max);
  if (more) *more = n == max;
  return n;
}

void XdpPort::on_frame(std::span<const uint8_t> f, OnPacket on_packet) {
  if (opt_.raw_rules && opt_.raw_rules->load(std::memory_order_relaxed) != 0 && opt_.raw(f)) {
    ++stats_->raw_received;
    return;
  }
  if (f.size() < kEth + wire::kIpv4HeaderBytes + wire::kUdpHeaderBytes) {
    ++stats_->not_roce;
    return;
  }
  const uint8_t* ip = f.data() + kEth;
  const size_t room = f.size() - kEth;
  UdpAddr src, dst;
  size_t ip_len;
  size_t udp_at;
  const uint16_t type = be16(f.data() + 12);
  uint8_t tos = 0;  // IPv4 TOS or IPv6 traffic class
  if (type == kEtherIpv4) {
    // RoCE v2 over IPv4 carries no options and is never fragmented.
    if ((ip[0] >> 4) != 4 || (ip[0] & 0xf) != 5 || ip[9] != 17 || (be16(ip + 6) & 0x3fff)) {
      ++stats_->not_roce;
      return;
    }
    ip_len = be16(ip + 2);
    tos = ip[1];
    udp_at = wire::kIpv4HeaderBytes;
    uint32_t a;
    memcpy(&a, ip + 12, 4);
    src.ip = IpAddr::v4(a);
    memcpy(&a, ip + 16, 4);
    dst.ip = IpAddr::v4(a);
  } else if (type == kEtherIpv6) {
    if (room < wire::kIpv6HeaderBytes + wire::kUdpHeaderBytes || (ip[0] >> 4) != 6 || ip[6] != 17) {
      ++stats_->not_roce;
      return;
    }
    ip_len = wire::kIpv6HeaderBytes + be16(ip + 4);
    tos = uint8_t((ip[0] & 0xf) << 4 | ip[1] >> 4);
    udp_at = wire::kIpv6HeaderBytes;
    memcpy(src.ip.b, ip + 8, 16);
    memcpy(dst.ip.b, ip + 24, 16);
  } else {
    ++stats_->not_roce;
    return;
  }
  const uint8_t* udp = ip + udp_at;
  src.port = be16(udp);
  dst.port = be16(udp + 2);
  const size_t udp_len = be16(udp + 4);
  if (dst.port != wire::kRoceV2Port) {
    ++stats_->not_roce;
    return;
  }
  if (ip_len > room || udp_len < wire::kUdpHeaderBytes + wire::kIcrcBytes || udp_at + udp_len > ip_len) {
    ++stats_->malformed;
    return;
  }
  std::span<const uint8_t> ib(udp + wire::kUdpHeaderBytes, udp_len - wire::kUdpHeaderBytes);
  const size_t n = ib.size() - wire::kIcrcBytes;
  // The ICRC over the headers as they came (IBA A17.3.3). IPv4 with DF and
  // no fragment offset, what every RoCE v2 sender writes, from the per-flow
  // cache; anything else over its own bytes.
  uint32_t want;
  const bool df = type == kEtherIpv4 && be16(ip + 6) == 0x4000;
  if (df)
    want = rx_icrc_.compute({src.ip.raw4(), dst.ip.raw4(), src.port, dst.port}, be16(ip + 4), ib.first(n));
  else
    want = wire::icrc({ip, udp_at}, {udp, wire::kUdpHeaderBytes}, ib.first(n));
  const bool ce = (tos & wire::kEcnMask) == wire::kEcnCe;
  if (want != wire::get_icrc(ib.data() + n)) {
    if ((df || type == kEtherIpv6) && on_gso_run(ib, src, dst, df ? be16(ip + 4) : 0, tos, ce, on_packet))
      return;
    ++stats_->bad_icrc;
    return;
  }
  ++stats_->received;
  if (opt_.capture) opt_.capture->write({ip, udp_at + wire::kUdpHeaderBytes}, ib, wall_ns(), false);
  decode_and_hand_on(ib, *stats_, src, dst, on_packet, 0, ce);
}

bool XdpPort::on_gso_run(std::span<const uint8_t> ib, const UdpAddr& src, const UdpAddr& dst, uint16_t id,
                         uint8_t tos, bool ce, OnPacket on_packet) {
  const bool v4 = src.ip.is_v4();
  // The ICRC of packet k of the run (its BTH .. ICRC), as sealed for the IP
  // header it would have had once cut: its own length and, over IPv4,
  // identification id + k (Linux numbers a GSO send's segments on).
  auto sealed = [&](std::span<const uint8_t> p, uint32_t k) {
    const auto body = p.first(p.size() - wire::kIcrcBytes);
    const uint32_t c =
        v4 ? rx_icrc_.compute({src.ip.raw4(), dst.ip.raw4(), src.port, dst.port}, uint16_t(id + k), body)
           : icrc_v6(src, dst, body);
    return c == wire::get_icrc(p.data() + body.size());
  };
  // The run's packet size: every packet but the last has it. Tried first:
  // the path MTUs, for a first packet that carries a full one; then every
  // size from the smallest packet up, within a bound on the bytes the
  // search reads (a corrupted frame costs no more than that).
  const uint8_t op = ib[0];
  const wire::OpInfo* info = wire::op_info(op);
  const size_t hdr =
      op == wire::kCnpOpcode ? wire::kBthBytes + wire::kCnpReservedBytes : wire::header_bytes(op);
  if (!hdr) return false;
  size_t size = 0;
  if (info && info->payload == wire::Payload::kFull)
    for (size_t mtu = 256; mtu <= 4096 && !size; mtu *= 2)
      if (hdr + mtu + wire::kIcrcBytes < ib.size() && sealed(ib.first(hdr + mtu + wire::kIcrcBytes), 0))
        size = hdr + mtu + wire::kIcrcBytes;
  size_t budget = kGsoSearchBytes;
  for (size_t s = hdr + wire::kIcrcBytes; !size && s < ib.size() && s <= budget; s += 4) {
    budget -= s;
    if (sealed(ib.first(s), 0)) size = s;
  }
  if (!size) return false;
  ++stats_->gso_runs;
  uint32_t k = 0;
  for (size_t at = 0; at < ib.size(); at += size, ++k) {
    const auto p = ib.subspan(at, std::min(size, ib.size() - at));
    if (p.size() < wire::kBthBytes + wire::kIcrcBytes || !sealed(p, k)) {
      ++stats_->bad_icrc;
      continue;
    }
    ++stats_->received;
    if (opt_.capture) {
      uint8_t h[kMaxIpUdpHeaders];
      const size_t hl = ip_udp_headers(src, dst, p.size(), h, uint16_t(id + k), p.data(), tos);
      opt_.capture->write({h, hl}, p, wall_ns(), false);
    }
    decode_and_hand_on(p, *stats_, src, dst, on_packet, 0, ce);
  }
  return true;
}

}  // namespace uroce::link
