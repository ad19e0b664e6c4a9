// The ICRC and the decoder against captures made by others: a real
// ConnectX-4 Lx capture and the scapy-built reference packets in
// ../shared/wire/samples (IPv4 and IPv6). Every RoCE v2 packet's ICRC as
// computed here must equal the one on the wire, and it must decode.
#include <gtest/gtest.h>
#include <pcap/pcap.h>
#include <sys/stat.h>

#include <cstring>
#include <string>

#include "wire/icrc.h"
#include "wire/ip_udp.h"
#include "wire/packet.h"

namespace uroce::wire {
namespace {

struct Counts {
  int roce = 0, icrc_ok = 0, decoded = 0;
};

/// Walks Ethernet (+VLAN) / IPv4|IPv6 / UDP 4791 frames of one capture.
Counts check_file(const std::string& path) {
  Counts c;
  char err[PCAP_ERRBUF_SIZE];
  pcap_t* pc = pcap_open_offline(path.c_str(), err);
  EXPECT_NE(pc, nullptr) << err;
  if (!pc) return c;
  EXPECT_EQ(pcap_datalink(pc), DLT_EN10MB) << path;
  pcap_pkthdr* h;
  const u_char* d;
  while (pcap_next_ex(pc, &h, &d) == 1) {
    size_t off = 12, n = h->caplen;
    if (n < 14) continue;
    uint16_t et = uint16_t(d[off] << 8 | d[off + 1]);
    while ((et == 0x8100 || et == 0x88a8) && off + 6 <= n) {
      off += 4;
      et = uint16_t(d[off] << 8 | d[off + 1]);
    }
    off += 2;
    size_t ip_len;
    if (et == 0x0800 && off + 20 <= n && d[off + 9] == 17)
      ip_len = size_t(d[off] & 0xf) * 4;
    else if (et == 0x86dd && off + 40 <= n && d[off + 6] == 17)
      ip_len = 40;
    else
      continue;
    if (ip_len != 20 && ip_len != 40) continue;
    const size_t udp = off + ip_len;
    if (udp + 8 > n || uint16_t(d[udp + 2] << 8 | d[udp + 3]) != kRoceV2Port) continue;
    const size_t udp_len = uint16_t(d[udp + 4] << 8 | d[udp + 5]);
    if (udp + udp_len > n || udp_len < 8 + 16) continue;
    ++c.roce;
    std::span<const uint8_t> ib(d + udp + 8, udp_len - 8);
    const uint32_t want = get_icrc(ib.data() + ib.size() - 4);
    const uint32_t got = icrc({d + off, ip_len}, {d + udp, 8}, ib.first(ib.size() - 4));
    EXPECT_EQ(got, want) << path << " frame " << c.roce;
    c.icrc_ok += got == want;
    Packet p;
    DecodeError e = decode(ib, &p);
    EXPECT_TRUE(e == DecodeError::kNone || e == DecodeError::kCnp)
        << path << " frame " << c.roce << ": " << to_string(e);
    c.decoded += e == DecodeError::kNone || e == DecodeError::kCnp;
  }
  pcap_close(pc);
  return c;
}

std::string samples_dir() {
  const char* d = getenv("UROCE_WIRE_SAMPLES");
  return d ? d : "";
}

TEST(WireCaptures, IcrcAndDecodeMatchOthersCaptures) {
  const std::string dir = samples_dir();
  struct stat st;
  if (dir.empty() || stat((dir + "/rocev2_valid.pcap").c_str(), &st) != 0)
    GTEST_SKIP() << "no reference captures (UROCE_WIRE_SAMPLES=" << dir << ")";
  int total = 0;
  for (const char* f : {"rocev2_valid.pcap", "rocev2_ipv6.pcap", "cx4lx_cnp.pcap"}) {
    Counts c = check_file(dir + "/" + f);
    EXPECT_GT(c.roce, 0) << f;
    EXPECT_EQ(c.icrc_ok, c.roce) << f;
    EXPECT_EQ(c.decoded, c.roce) << f;
    total += c.roce;
  }
  EXPECT_GE(total, 20);
}

}  // namespace
}  // namespace uroce::wire
