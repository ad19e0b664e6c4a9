// Writes RoCE v2 frames to a capture file (libpcap format, Ethernet link
// type) that Wireshark and tshark open: the capture setting of the UDP link
// and the tools use it. Thread-safe; every frame is flushed so a capture is
// complete even if the process is killed.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "common/status.h"

typedef struct pcap pcap_t;
typedef struct pcap_dumper pcap_dumper_t;

namespace uroce::wire {

class PcapWriter {
 public:
  static Result<std::unique_ptr<PcapWriter>> open(const std::string& path);
  ~PcapWriter();
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;

  /// One frame: `ip_udp` (IP and UDP headers) then `payload` (BTH .. ICRC),
  /// behind a made-up Ethernet header (`outgoing` picks which of two MACs
  /// is the source, so directions stay apart in the capture).
  void write(std::span<const uint8_t> ip_udp, std::span<const uint8_t> payload, uint64_t unix_time_ns,
             bool outgoing);

 private:
  PcapWriter() = default;
  std::mutex mu_;
  uint64_t last_ns_ = 0;  // the last frame's time (under mu_)
  pcap_t* dead_ = nullptr;
  pcap_dumper_t* dumper_ = nullptr;
};

}  // namespace uroce::wire
