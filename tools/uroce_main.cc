// uroce: the command-line tool beside the library.
//
//   uroce capture [-o FILE] [--sent-only] -- COMMAND [ARGS...]
//
// Runs COMMAND with the capture setting on (UROCE_CAPTURE, one file per
// process it starts, docs/network-link.md), waits for it, and merges what
// every process sent and received over the network link into FILE (libpcap
// format, frames in time order) for Wireshark or tshark. With --sent-only
// each packet appears once, as its sender wrote it (between two processes
// of one host every packet is otherwise there twice: sent and received).
// Exits with COMMAND's status.
//
//   uroce devnodes [--remove] [--dir DIR] [DEVICE...]
//
// Makes /dev/infiniband/<dev_name> of uroce's devices, which UCX needs to
// use them (tools/devnodes.cc says which devices and why).
//
//   uroce sysfs -- COMMAND [ARGS...]
//
// Runs COMMAND where /sys/class/infiniband/<dev>/ exists for uroce's
// devices (tools/sysfs_view.cc), for programs that read sysfs themselves.
#include <dirent.h>
#include <pcap/pcap.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tools/command.h"
#include "tools/devnodes.h"
#include "tools/status.h"
#include "tools/sysfs_view.h"
#include "tools/trace.h"

namespace {

// The capture writer's made-up source MAC of frames a process sent
// (src/wire/pcap_writer.cc: 02:00:00:00:00:01 sends, ...:02 receives).
constexpr unsigned char kSentMac[6] = {0x02, 0, 0, 0, 0, 0x01};

struct Part {
  pcap_t* p = nullptr;
  pcap_pkthdr* h = nullptr;
  const u_char* d = nullptr;
  bool next() { return pcap_next_ex(p, &h, &d) == 1; }
};

bool earlier(const pcap_pkthdr* a, const pcap_pkthdr* b) {
  return a->ts.tv_sec != b->ts.tv_sec ? a->ts.tv_sec < b->ts.tv_sec : a->ts.tv_usec < b->ts.tv_usec;
}

/// Merges every part-*.pcap in `dir` into `out` by time; removes the parts.
/// Returns the number of frames written, or -1.
long merge(const std::string& dir, const std::string& out, bool sent_only, int* parts_seen) {
  std::vector<Part> parts;
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (strncmp(e->d_name, "part-", 5) == 0) files.push_back(dir + "/" + e->d_name);
    closedir(d);
  }
  char err[PCAP_ERRBUF_SIZE];
  for (const std::string& f : files) {
    Part p;
    p.p = pcap_open_offline(f.c_str(), err);
    if (!p.p) {
      fprintf(stderr, "uroce capture: %s: %s\n", f.c_str(), err);  // e.g. a process killed before its header
      continue;
    }
    if (p.next())
      parts.push_back(p);
    else
      pcap_close(p.p);
  }
  *parts_seen = int(files.size());
  pcap_t* dead = pcap_open_dead(DLT_EN10MB, 65535);
  pcap_dumper_t* dump = pcap_dump_open(dead, out.c_str());
  if (!dump) {
    fprintf(stderr, "uroce capture: %s: %s\n", out.c_str(), pcap_geterr(dead));
    pcap_close(dead);
    return -1;
  }
  long frames = 0;
  while (!parts.empty()) {
    size_t first = 0;
    for (size_t i = 1; i < parts.size(); ++i)
      if (earlier(parts[i].h, parts[first].h)) first = i;
    Part& p = parts[first];
    const bool sent = p.h->caplen >= 12 && memcmp(p.d + 6, kSentMac, 6) == 0;
    if (!sent_only || sent) {
      pcap_dump(reinterpret_cast<u_char*>(dump), p.h, p.d);
      ++frames;
    }
    if (!p.next()) {
      pcap_close(p.p);
      parts.erase(parts.begin() + long(first));
    }
  }
  pcap_dump_close(dump);
  pcap_close(dead);
  for (const std::string& f : files) unlink(f.c_str());
  return frames;
}

int capture(const std::string& out, bool sent_only, const std::vector<std::string>& command) {
  const std::string dir = uroce::tools::make_temp_dir("uroce-capture-");
  if (dir.empty()) return 1;
  const int status = uroce::tools::run_with(command, "UROCE_CAPTURE", dir + "/part-%p.pcap");
  int parts = 0;
  const long frames = merge(dir, out, sent_only, &parts);
  rmdir(dir.c_str());
  if (frames >= 0)
    fprintf(stderr, "uroce capture: %ld frames from %d processes -> %s\n", frames, parts, out.c_str());
  if (status < 0) return 1;
  return frames < 0 && status == 0 ? 1 : status;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"uroce: tools for the uroce software RDMA NIC"};
  app.require_subcommand(1);
  CLI::App* cap = app.add_subcommand(
      "capture",
      "Run a command with uroce's capture on and write every RoCE packet its processes sent and received "
      "over the network link to one pcap file");
  std::string out = "uroce.pcap";
  bool sent_only = false;
  std::vector<std::string> command;
  cap->add_option("-o,--output", out, "pcap file to write")->capture_default_str();
  cap->add_flag("--sent-only", sent_only, "each packet once, as its sender wrote it");
  cap->add_option("command", command, "the command to run (after --)")->required();
  CLI::App* dn = app.add_subcommand(
      "devnodes",
      "Make /dev/infiniband/<dev_name> for uroce's devices (links to /dev/null), which UCX needs to use "
      "them: "
      "every device of a network interface, uroce_lo only when it is the only one, or the DEVICEs named");
  uroce::tools::DevnodesOptions dno;
  dn->add_flag("--remove", dno.remove,
               "remove the links instead (of every uroce device, or of the DEVICEs named)");
  dn->add_option("--dir", dno.dir, "directory of the entries")->capture_default_str();
  dn->add_option("devices", dno.devices, "uroce device names (uroce_lo, uroce_eth0, ...)");
  CLI::App* ln =
      app.add_subcommand("link", "Show uroce's devices: interface, state, MTU, GIDs, serving uroced");
  bool link_json = false;
  ln->add_flag("-j,--json", link_json, "JSON output");
  CLI::App* st = app.add_subcommand(
      "stat", "Show what the network link counted, per device (every QP it had) or for one QP (--qp)");
  uroce::tools::StatOptions so;
  st->add_flag("-j,--json", so.json, "JSON output");
  st->add_option("device", so.device, "a uroce device (uroce_lo, ...); default: every device");
  st->add_option("--qp", so.qpn, "a QP number: its counters");
  CLI::App* res = app.add_subcommand("res", "Show resources");
  res->require_subcommand(1);
  CLI::App* res_qp =
      res->add_subcommand("qp", "The QPs on this host: device, owner, type, state, peer, link");
  bool res_json = false;
  res_qp->add_flag("-j,--json", res_json, "JSON output");
  CLI::App* sv = app.add_subcommand(
      "sysfs",
      "Run a command that sees /sys/class/infiniband/<dev> of uroce's devices (a mount namespace of its "
      "own)");
  std::vector<std::string> sysfs_command;
  sv->add_option("command", sysfs_command, "the command to run (after --)")->required();
  CLI::App* tr = app.add_subcommand(
      "trace",
      "Run a command with uroce's trace on and print, per QP, the timeline of its work requests, packets, "
      "completions and state changes");
  std::string trace_out;
  std::vector<std::string> trace_command;
  tr->add_option("-o,--output", trace_out, "file to write (default: standard error)");
  tr->add_option("command", trace_command, "the command to run (after --)")->required();
  CLI11_PARSE(app, argc, argv);
  if (tr->parsed()) return uroce::tools::trace(trace_out, trace_command);
  if (sv->parsed()) return uroce::tools::sysfs_view(sysfs_command);
  if (cap->parsed()) return capture(out, sent_only, command);
  if (dn->parsed()) return uroce::tools::devnodes(dno);
  if (ln->parsed()) return uroce::tools::link_show(link_json);
  if (st->parsed()) return uroce::tools::stat_show(so);
  if (res_qp->parsed()) return uroce::tools::res_qp_show(res_json);
  return 0;
}
