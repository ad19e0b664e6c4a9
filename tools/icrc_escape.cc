// icrc_escape: how often a corrupted RoCE v2 packet reaches the transport
// through the UDP link's receive checks (docs/network-link.md, "The IPv4
// identification"). Packets are sealed as a sender seals them, corrupted
// by the fault injector (UROCE_FAULTS's corrupt=: one byte changed), then
// checked as UdpEndpoint checks them: the ICRC solved for the IPv4
// identification (wire::Ipv4Icrc::solve), and the solved value judged
// (link::IdTrust). Two senders:
//   uroce:   identification 0, or k for the k-th datagram of a GSO send;
//   counter: a peer that counts (kernel rxe: +1 per packet and random
//            jumps), whose counter the receiver follows: one good packet in
//            every 8 keeps it known.
// No sockets: the checks themselves, many times, so that rare events show.
//
//   icrc_escape [--packets N] [--seed S] [--extra-bytes K]
// --extra-bytes: K more random bytes changed in each corrupted packet (the
// injector changes one; a one-byte error is caught by the ICRC unless it
// falls where it mimics an identification change).
#include <arpa/inet.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "link/fault_injector.h"
#include "link/id_trust.h"
#include "wire/icrc.h"
#include "wire/packet.h"

using namespace uroce;

namespace {

struct Tally {
  uint64_t corrupted = 0, uncovered = 0, solved = 0, believed = 0;
};

/// Sends `n` corrupted packets (and the good ones that keep a counter
/// known) from `counter`-style or uroce-style identifications.
Tally run(uint64_t n, uint64_t seed, bool counter, int extra_bytes) {
  std::mt19937_64 rng(seed);
  link::FaultConfig fc;
  fc.corrupt = 1.0;
  fc.seed = seed;
  link::FaultInjector faults(fc);
  wire::Ipv4Icrc tx, rx;
  link::IdTrust trust;
  const wire::Ipv4Icrc::Flow flow{htonl(0x0a000002), htonl(0x0a000001), 49152, 4791};
  std::vector<uint8_t> payload(4096);
  for (auto& b : payload) b = uint8_t(rng());
  std::vector<uint8_t> buf(64 + payload.size());
  std::vector<uint8_t> bad;
  std::unordered_set<size_t> good;  // hashes of the good packets sent (a parked one may go later)
  auto hash = [](std::span<const uint8_t> q) {
    return std::hash<std::string_view>()({reinterpret_cast<const char*>(q.data()), q.size()});
  };
  Tally t;
  uint16_t id = uint16_t(rng() | 64);
  uint64_t now = 0;
  auto hand_on = [&](std::span<const uint8_t> q, uint32_t, uint16_t, uint16_t) {
    if (!good.count(hash(q))) ++t.believed;  // not a packet that was sent intact: a corrupted one escaped
  };
  for (uint64_t i = 0; t.corrupted < n; ++i) {
    // A counting peer: the first two packets, then one in 8, go intact and
    // make (keep) its counter known to the receiver.
    const bool is_good = counter && (i < 2 || i % 8 == 0);
    wire::Packet p;
    p.bth.opcode = wire::opcode(wire::Service::kRc, wire::kSendOnly);
    p.bth.dest_qp = 0x1234;
    p.bth.psn = uint32_t(i) & 0xffffff;
    const size_t len = size_t(rng() % 1025);  // 0..1024 bytes
    p.payload = std::span<const uint8_t>(payload.data(), len);
    const size_t sz = wire::encode(p, buf.data(), buf.size());
    const size_t all = sz + wire::kIcrcBytes;
    uint16_t sent_id;
    if (counter) {
      sent_id = id;
      id = uint16_t(id + 1 + rng() % (i < 2 ? 1 : 4));
      if (id < 64) id = 64;
    } else {
      sent_id = uint16_t(rng() % 64);
    }
    wire::put_icrc(buf.data() + sz, tx.compute(flow, sent_id, {buf.data(), sz}));
    std::span<const uint8_t> got(buf.data(), all);
    if (is_good) {
      good.insert(hash(got));
    } else {
      faults.process(got, [&](std::span<const uint8_t> d, uint64_t) { bad.assign(d.begin(), d.end()); });
      for (int b = 0; b < extra_bytes; ++b) bad[rng() % all] ^= uint8_t(1 + rng() % 255);
      got = bad;
      // Byte 4 of the BTH (FECN, BECN, reserved) is outside the ICRC by the
      // spec (Annex A17): such a packet is the packet sent, not counted.
      if (memcmp(got.data(), buf.data(), 4) == 0 && memcmp(got.data() + 5, buf.data() + 5, all - 5) == 0) {
        ++t.uncovered;
        continue;
      }
      ++t.corrupted;
    }
    const int solved = rx.solve(flow, got.first(all - wire::kIcrcBytes), wire::get_icrc(got.data() + sz));
    if (solved >= 0 && solved < link::IdTrust::kOwnIds) {  // believed as is, as UdpEndpoint does
      if (trust.parked()) trust.saw_other(flow.src);
      if (!is_good) ++t.solved;
      hand_on(got, flow.src, flow.sport, uint16_t(solved));
      continue;
    }
    if (solved < 0) {
      trust.saw_other(flow.src);  // as UdpEndpoint does
      continue;
    }
    if (!is_good) ++t.solved;
    now += 1000;  // 1 us a packet: parked ones time out as on a busy link
    trust.judge(got, flow.src, flow.sport, flow.dst, uint16_t(solved), now, hand_on);
    if (trust.parked()) trust.recheck(now, hand_on);
  }
  fprintf(stderr, "  (trust: parked %llu vouched %llu succeeded %llu unproven %llu)\n",
          (unsigned long long)trust.stats().parked, (unsigned long long)trust.stats().vouched,
          (unsigned long long)trust.stats().succeeded, (unsigned long long)trust.stats().unproven);
  return t;
}

void report(const char* name, const Tally& t) {
  printf(
      "%-8s corrupted %12llu  solved for some identification %8llu (1 in %.0f)  believed %4llu (%.2e per "
      "corrupted packet)\n",
      name, (unsigned long long)t.corrupted, (unsigned long long)t.solved,
      t.solved ? double(t.corrupted) / double(t.solved) : 0.0, (unsigned long long)t.believed,
      double(t.believed) / double(t.corrupted));
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t n = 1ull << 24, seed = 1;
  int extra = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--packets"))
      n = strtoull(argv[i + 1], nullptr, 0);
    else if (!strcmp(argv[i], "--seed"))
      seed = strtoull(argv[i + 1], nullptr, 0);
    else if (!strcmp(argv[i], "--extra-bytes"))
      extra = atoi(argv[i + 1]);
  }
  printf(
      "each sender: %llu corrupted packets (one byte changed by the fault injector, %d more at random), "
      "payload 0..1024 bytes\n",
      (unsigned long long)n, extra);
  report("uroce", run(n, seed, false, extra));
  report("counter", run(n, seed + 1, true, extra));
  printf(
      "expected per corrupted packet: uroce 64 / 2^32 = %.2e; counter about (64 + %u + %u) / 2^32 = %.2e\n",
      64.0 / 4294967296.0, unsigned(link::IdTrust::kAhead + link::IdTrust::kBehind),
      unsigned(link::IdTrust::kSuccessor + 1),
      (64.0 + link::IdTrust::kAhead + link::IdTrust::kBehind + link::IdTrust::kSuccessor + 1) / 4294967296.0);
  return 0;
}
