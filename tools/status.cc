#include "tools/status.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "contract/control_client.h"
#include "contract/names.h"
#include "contract/report.h"
#include "link/ip_addr.h"

namespace uroce::tools {

namespace {

/// uroced's report, copied out of its memfd.
struct Report {
  core::ReportHeader header{};
  std::vector<core::ReportQp> qps;
  std::vector<core::ReportDev> devs;
};

bool fetch_report(Report* r) {
  auto cc = core::ControlClient::get();
  if (!cc.is_ok()) {
    fprintf(stderr, "uroce: cannot reach uroced: %s\n", strerror(cc.err()));
    return false;
  }
  auto fd = cc.value()->report();
  if (!fd.is_ok()) {
    fprintf(stderr, "uroce: uroced gave no report: %s\n", strerror(fd.err()));
    return false;
  }
  struct stat st;
  bool ok = fstat(fd.value(), &st) == 0 && size_t(st.st_size) >= sizeof(core::ReportHeader);
  void* p = ok ? mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd.value(), 0) : MAP_FAILED;
  close(fd.value());
  if (p == MAP_FAILED) {
    fprintf(stderr, "uroce: unreadable report\n");
    return false;
  }
  const auto* b = static_cast<const uint8_t*>(p);
  memcpy(&r->header, b, sizeof(r->header));
  const size_t need = sizeof(core::ReportHeader) + size_t(r->header.num_qps) * sizeof(core::ReportQp) +
                      size_t(r->header.num_devs) * sizeof(core::ReportDev);
  ok = r->header.magic == core::ReportHeader::kMagic && size_t(st.st_size) == need;
  if (ok) {
    const auto* q = reinterpret_cast<const core::ReportQp*>(b + sizeof(core::ReportHeader));
    r->qps.assign(q, q + r->header.num_qps);
    const auto* d = reinterpret_cast<const core::ReportDev*>(q + r->header.num_qps);
    r->devs.assign(d, d + r->header.num_devs);
  }
  munmap(p, size_t(st.st_size));
  if (!ok) fprintf(stderr, "uroce: malformed report (another version of uroced?)\n");
  return ok;
}

std::string name_of(const char* field, size_t n) { return std::string(field, strnlen(field, n)); }

/// The counters as JSON members ("name": value, ...) or as text lines.
/// Every counter of `c`; a QP's gauges too when `gauges` (a device's
/// totals have none).
void print_counters(const core::NetCounters& c, bool json, const char* indent, bool gauges) {
  bool first = true;
  for (const core::CounterField& f : core::net_counter_fields()) {
    if (f.gauge && !gauges) continue;
    const unsigned long long v = core::counter_at(c, f);
    if (json) {
      printf("%s\"%.*s\":%llu", first ? "" : ",", int(f.name.size()), f.name.data(), v);
    } else {
      printf("%s%-24.*s %llu\n", indent, int(f.name.size()), f.name.data(), v);
    }
    first = false;
  }
}

std::string operstate(const char* ifname) {
  std::ifstream in(std::string("/sys/class/net/") + ifname + "/operstate");
  std::string s;
  return in >> s ? s : "unknown";
}

}  // namespace

int link_show(bool json) {
  auto cc = core::ControlClient::get();
  if (!cc.is_ok()) {
    fprintf(stderr, "uroce: cannot reach uroced: %s\n", strerror(cc.err()));
    return 1;
  }
  Report r;
  if (!fetch_report(&r)) return 1;
  const auto& devs = cc.value()->devices();
  if (json) printf("[");
  for (size_t i = 0; i < devs.size(); ++i) {
    const core::DeviceInfo& d = devs[i];
    const std::string state = operstate(d.ifname);
    if (json) {
      printf(
          "%s{\"dev\":\"%s\",\"ifname\":\"%s\",\"ifindex\":%u,\"ifstate\":\"%s\",\"mtu\":%u,\"uroced_pid\":%"
          "d,"
          "\"gids\":[",
          i ? "," : "", d.name, d.ifname, d.ifindex, state.c_str(), d.if_mtu, r.header.uroced_pid);
    } else {
      printf("%s: netdev %s (index %u) %s mtu %u, served by uroced pid %d\n", d.name, d.ifname, d.ifindex,
             state.c_str(), d.if_mtu, r.header.uroced_pid);
    }
    for (uint32_t g = 0; g < d.num_gids; ++g) {
      char hex[40];
      char* o = hex;
      for (int k = 0; k < 16; k += 2)
        o += sprintf(o, "%s%02x%02x", k ? ":" : "", d.gids[g][k], d.gids[g][k + 1]);
      const std::string ip = link::to_string(link::IpAddr::of_gid(d.gids[g], d.ifindex));
      const char* type = d.gid_types[g] == uint32_t(core::GidType::kRoceV2) ? "RoCE v2" : "RoCE v1";
      if (json)
        printf("%s{\"index\":%u,\"gid\":\"%s\",\"ip\":\"%s\",\"type\":\"%s\"}", g ? "," : "", g, hex,
               ip.c_str(), type);
      else
        printf("    gid %u %s (%s) %s\n", g, hex, ip.c_str(), type);
    }
    if (json) printf("]}");
  }
  if (json) printf("]\n");
  return 0;
}

int stat_show(const StatOptions& o) {
  Report r;
  if (!fetch_report(&r)) return 1;
  if (o.qpn) {
    for (const core::ReportQp& q : r.qps) {
      if (q.qpn != o.qpn) continue;
      const std::string dev = name_of(q.dev, sizeof(q.dev));
      if (o.json) {
        printf("[{\"dev\":\"%s\",\"qpn\":%u,\"pid\":%d,\"network\":%s,\"counters\":{", dev.c_str(), q.qpn,
               q.pid, q.has_counters ? "true" : "false");
        print_counters(q.counters, true, "", true);
        printf("}}]\n");
      } else {
        printf("%s qp %u (pid %d)%s\n", dev.c_str(), q.qpn, q.pid,
               q.has_counters ? "" : ": not on the network link, nothing counted");
        if (q.has_counters) print_counters(q.counters, false, "    ", true);
      }
      return 0;
    }
    fprintf(stderr, "uroce: no QP %u on this uroced\n", o.qpn);
    return 1;
  }
  bool any = false;
  if (o.json) printf("[");
  for (const core::ReportDev& d : r.devs) {
    const std::string dev = name_of(d.dev, sizeof(d.dev));
    if (!o.device.empty() && dev != o.device) continue;
    if (o.json) {
      printf("%s{\"dev\":\"%s\",\"qps\":%u,\"counters\":{", any ? "," : "", dev.c_str(), d.qps);
      print_counters(d.counters, true, "", false);
      printf("}}");
    } else {
      printf("%s: %u QPs\n", dev.c_str(), d.qps);
      print_counters(d.counters, false, "    ", false);
    }
    any = true;
  }
  if (o.json) printf("]\n");
  if (!any && !o.device.empty()) {
    fprintf(stderr, "uroce: no counters for %s (no process has opened it)\n", o.device.c_str());
    return 1;
  }
  return 0;
}

int res_qp_show(bool json) {
  Report r;
  if (!fetch_report(&r)) return 1;
  if (json)
    printf("[");
  else
    printf("%-12s %-9s %-8s %-9s %-6s %-9s %-4s %7s %9s\n", "DEV", "QPN", "PID", "TYPE", "STATE", "DEST_QPN",
           "LINK", "WINDOW", "SRTT_US");
  bool first = true;
  for (const core::ReportQp& q : r.qps) {
    const std::string dev = name_of(q.dev, sizeof(q.dev));
    const char* link = core::qp_link_name(q.link);
    // A network QP's congestion window (packets) and smoothed round trip.
    const bool cc = q.has_counters && q.counters.cc_now.window;
    const unsigned long long window = q.counters.cc_now.window;
    const double srtt_us = double(q.counters.cc_now.srtt_ns) / 1e3;
    if (json) {
      printf(
          "%s{\"dev\":\"%s\",\"qpn\":%u,\"pid\":%d,\"type\":\"%s\",\"state\":\"%s\",\"dest_qpn\":%u,\"link\":"
          "\"%s\"",
          first ? "" : ",", dev.c_str(), q.qpn, q.pid, core::qp_type_name(core::QpType(q.type)),
          core::qp_state_name(core::QpState(q.state)), q.dest_qpn, link);
      if (cc) printf(",\"window\":%llu,\"srtt_us\":%.1f", window, srtt_us);
      printf("}");
    } else {
      printf("%-12s %-9u %-8d %-9s %-6s %-9u %-4s", dev.c_str(), q.qpn, q.pid,
             core::qp_type_name(core::QpType(q.type)), core::qp_state_name(core::QpState(q.state)),
             q.dest_qpn, link);
      if (cc)
        printf(" %7llu %9.1f\n", window, srtt_us);
      else
        printf(" %7s %9s\n", "-", "-");
    }
    first = false;
  }
  if (json) printf("]\n");
  return 0;
}

}  // namespace uroce::tools
