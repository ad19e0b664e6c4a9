#include "tools/trace.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "tools/command.h"

namespace uroce::tools {

namespace {

struct Event {
  unsigned long long ns;
  int pid;
  unsigned qpn;
  std::string text;
};

/// Reads every trace-*.txt in `dir` (and removes them).
std::vector<Event> read_events(const std::string& dir, int* files) {
  std::vector<Event> ev;
  *files = 0;
  DIR* d = opendir(dir.c_str());
  if (!d) return ev;
  while (dirent* e = readdir(d)) {
    if (strncmp(e->d_name, "trace-", 6) != 0) continue;
    const std::string path = dir + "/" + e->d_name;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      Event x;
      if (!(ls >> x.ns >> x.pid >> x.qpn)) continue;  // a line cut by a killed process
      std::getline(ls >> std::ws, x.text);
      ev.push_back(std::move(x));
    }
    unlink(path.c_str());
    ++*files;
  }
  closedir(d);
  std::stable_sort(ev.begin(), ev.end(), [](const Event& a, const Event& b) { return a.ns < b.ns; });
  return ev;
}

}  // namespace

int trace(const std::string& out, const std::vector<std::string>& command) {
  const std::string dir = make_temp_dir("uroce-trace-");
  if (dir.empty()) return 1;
  const int status = run_with(command, "UROCE_TRACE", dir + "/trace-%p.txt");
  int files = 0;
  const std::vector<Event> ev = read_events(dir, &files);
  rmdir(dir.c_str());
  FILE* f = out.empty() ? stderr : fopen(out.c_str(), "w");
  if (!f) {
    fprintf(stderr, "uroce trace: cannot write %s: %s\n", out.c_str(), strerror(errno));
    return 1;
  }
  // One timeline per QP, in the order the QPs first appear; times are
  // microseconds since the first event of the whole run (the processes'
  // clocks are the one realtime clock of the host). An event a process
  // logged for a QP of another process (a completion it placed as that QP's
  // NIC, over shared memory) is in that QP's timeline, with its pid.
  std::map<unsigned, std::vector<const Event*>> by_qp;
  std::vector<unsigned> order;
  for (const Event& e : ev) {
    auto& v = by_qp[e.qpn];
    if (v.empty()) order.push_back(e.qpn);
    v.push_back(&e);
  }
  const unsigned long long t0 = ev.empty() ? 0 : ev.front().ns;
  for (unsigned qpn : order) {
    const auto& v = by_qp[qpn];
    fprintf(f, "QP %u (pid %d): %zu events\n", qpn, v.front()->pid, v.size());
    for (const Event* e : v)
      fprintf(f, "  %12.3f us  pid %-7d %s\n", double(e->ns - t0) / 1000.0, e->pid, e->text.c_str());
  }
  fprintf(stderr, "uroce trace: %zu events on %zu QPs from %d processes%s%s\n", ev.size(), order.size(),
          files, out.empty() ? "" : " -> ", out.c_str());
  if (f != stderr) fclose(f);
  if (status < 0) return 1;
  return status;
}

}  // namespace uroce::tools
