#include "wire/pcap_writer.h"

#include <dlfcn.h>
#include <pcap/pcap.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace uroce::wire {

namespace {

/// libpcap, opened when the first capture is asked for: the drop-in
/// libibverbs.so.1 must load on machines without it (docs/network-link.md).
struct Pcap {
  decltype(&pcap_open_dead) open_dead = nullptr;
  decltype(&pcap_dump_open) dump_open = nullptr;
  decltype(&pcap_dump) dump = nullptr;
  decltype(&pcap_dump_flush) dump_flush = nullptr;
  decltype(&pcap_dump_close) dump_close = nullptr;
  decltype(&pcap_close) close = nullptr;
  bool ok = false;
};

const Pcap& pcap_lib() {
  static const Pcap p = [] {
    Pcap r;
    void* h = dlopen("libpcap.so.0.8", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libpcap.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return r;
    r.open_dead = reinterpret_cast<decltype(r.open_dead)>(dlsym(h, "pcap_open_dead"));
    r.dump_open = reinterpret_cast<decltype(r.dump_open)>(dlsym(h, "pcap_dump_open"));
    r.dump = reinterpret_cast<decltype(r.dump)>(dlsym(h, "pcap_dump"));
    r.dump_flush = reinterpret_cast<decltype(r.dump_flush)>(dlsym(h, "pcap_dump_flush"));
    r.dump_close = reinterpret_cast<decltype(r.dump_close)>(dlsym(h, "pcap_dump_close"));
    r.close = reinterpret_cast<decltype(r.close)>(dlsym(h, "pcap_close"));
    r.ok = r.open_dead && r.dump_open && r.dump && r.dump_flush && r.dump_close && r.close;
    return r;
  }();
  return p;
}

}  // namespace

Result<std::unique_ptr<PcapWriter>> PcapWriter::open(const std::string& path) {
  const Pcap& lib = pcap_lib();
  if (!lib.ok) return Status(ENOSYS);  // libpcap (Debian: libpcap0.8) is not installed
  std::unique_ptr<PcapWriter> w(new PcapWriter());
  w->dead_ = lib.open_dead(DLT_EN10MB, 65535);
  if (!w->dead_) return Status(ENOMEM);
  w->dumper_ = lib.dump_open(w->dead_, path.c_str());
  if (!w->dumper_) return Status(errno ? errno : EIO);
  return w;
}

PcapWriter::~PcapWriter() {
  if (dumper_) pcap_lib().dump_close(dumper_);
  if (dead_) pcap_lib().close(dead_);
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
  std::lock_guard<std::mutex> g(mu_);
  // In time order within the file (what merging captures relies on): two
  // threads may read the clock in one order and get here in the other.
  if (unix_time_ns < last_ns_) unix_time_ns = last_ns_;
  last_ns_ = unix_time_ns;
  pcap_pkthdr h{};
  h.ts.tv_sec = time_t(unix_time_ns / 1000000000ull);
  h.ts.tv_usec = suseconds_t(unix_time_ns % 1000000000ull / 1000);
  h.caplen = h.len = uint32_t(frame.size());
  pcap_lib().dump(reinterpret_cast<u_char*>(dumper_), &h, frame.data());
  pcap_lib().dump_flush(dumper_);
}

}  // namespace uroce::wire
