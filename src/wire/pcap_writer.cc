#include "wire/pcap_writer.h"

#include <pcap/pcap.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace uroce::wire {

Result<std::unique_ptr<PcapWriter>> PcapWriter::open(const std::string& path) {
  std::unique_ptr<PcapWriter> w(new PcapWriter());
  w->dead_ = pcap_open_dead(DLT_EN10MB, 65535);
  if (!w->dead_) return Status(ENOMEM);
  w->dumper_ = pcap_dump_open(w->dead_, path.c_str());
  if (!w->dumper_) return Status(errno ? errno : EIO);
  return w;
}

PcapWriter::~PcapWriter() {
  if (dumper_) pcap_dump_close(dumper_);
  if (dead_) pcap_close(dead_);
}

void PcapWriter::write(std::span<const uint8_t> ip_udp, std::span<const uint8_t> payload,
                       uint64_t unix_time_ns, bool outgoing) {
  // Locally administered MACs: 02:00:00:00:00:01 sends, ...:02 receives.
  static const uint8_t kOut[14] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00};
  static const uint8_t kIn[14] = {2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00};
  std::vector<uint8_t> frame(14 + ip_udp.size() + payload.size());
  memcpy(frame.data(), outgoing ? kOut : kIn, 14);
  if (!ip_udp.empty() && (ip_udp[0] >> 4) == 6) {
    frame[12] = 0x86;
    frame[13] = 0xdd;
  }
  if (!ip_udp.empty()) memcpy(frame.data() + 14, ip_udp.data(), ip_udp.size());
  if (!payload.empty()) memcpy(frame.data() + 14 + ip_udp.size(), payload.data(), payload.size());
  pcap_pkthdr h{};
  h.ts.tv_sec = time_t(unix_time_ns / 1000000000ull);
  h.ts.tv_usec = suseconds_t(unix_time_ns % 1000000000ull / 1000);
  h.caplen = h.len = uint32_t(frame.size());
  std::lock_guard<std::mutex> g(mu_);
  pcap_dump(reinterpret_cast<u_char*>(dumper_), &h, frame.data());
  pcap_dump_flush(dumper_);
}

}  // namespace uroce::wire
