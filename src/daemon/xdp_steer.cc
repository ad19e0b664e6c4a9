#include "daemon/xdp_steer.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/log.h"

// The program's object file, embedded at build time (src/CMakeLists.txt).
extern "C" const unsigned char uroce_roce_steer_obj[];
extern "C" const unsigned char uroce_roce_steer_obj_end[];

namespace uroce::daemon {

// The program's raw_rule is this struct, byte for byte.
static_assert(sizeof(XdpSteer::RawRule) == 2 * 72 + 8);
static_assert(offsetof(wire::FlowKey, layers) == 36 && offsetof(wire::FlowKey, src_ip6) == 40);

namespace {

// libbpf's messages go to uroce's log: warnings as warnings, the rest at debug.
int on_libbpf_message(enum libbpf_print_level level, const char* fmt, va_list ap) {
  char line[512];
  vsnprintf(line, sizeof(line), fmt, ap);
  const size_t n = strlen(line);
  if (n && line[n - 1] == '\n') line[n - 1] = 0;
  if (level == LIBBPF_WARN)
    UROCE_WARN("libbpf: %s", line);
  else
    UROCE_DBG("libbpf: %s", line);
  return 0;
}

}  // namespace

Result<std::unique_ptr<XdpSteer>> XdpSteer::attach(int ifindex, Mode mode) {
  static std::once_flag print_once;
  std::call_once(print_once, [] { libbpf_set_print(on_libbpf_message); });
  std::unique_ptr<XdpSteer> s(new XdpSteer());
  s->ifindex_ = ifindex;
  LIBBPF_OPTS(bpf_object_open_opts, open_opts, .object_name = "uroce_roce_steer");
  s->obj_ = bpf_object__open_mem(uroce_roce_steer_obj,
                                 size_t(uroce_roce_steer_obj_end - uroce_roce_steer_obj), &open_opts);
  if (!s->obj_) return Status(errno ? errno : EINVAL);
  if (int e = bpf_object__load(s->obj_); e < 0) return Status(-e);
  struct bpf_program* prog = bpf_object__find_program_by_name(s->obj_, "roce_steer");
  s->xsks_fd_ = bpf_object__find_map_fd_by_name(s->obj_, "xsks");
  s->qps_fd_ = bpf_object__find_map_fd_by_name(s->obj_, "qp_socks");
  s->counts_fd_ = bpf_object__find_map_fd_by_name(s->obj_, "counts");
  s->raw_rules_fd_ = bpf_object__find_map_fd_by_name(s->obj_, "raw_rules");
  s->raw_count_fd_ = bpf_object__find_map_fd_by_name(s->obj_, "raw_count");
  if (!prog || s->xsks_fd_ < 0 || s->qps_fd_ < 0 || s->counts_fd_ < 0 || s->raw_rules_fd_ < 0 ||
      s->raw_count_fd_ < 0)
    return Status(ENOENT);
  LIBBPF_OPTS(bpf_link_create_opts, link_opts,
              .flags = uint32_t(mode == Mode::kGeneric ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE));
  s->link_fd_ = bpf_link_create(bpf_program__fd(prog), ifindex, BPF_XDP, &link_opts);
  if (s->link_fd_ < 0) return Status(-s->link_fd_);
  return s;
}

XdpSteer::~XdpSteer() {
  if (link_fd_ >= 0) close(link_fd_);  // the last reference: the program leaves the interface
  if (obj_) bpf_object__close(obj_);
}

Status XdpSteer::set_socket(uint32_t slot, int xsk_fd) {
  if (slot >= kMaxSockets) return Status(EINVAL);
  uint32_t fd = uint32_t(xsk_fd);
  if (bpf_map_update_elem(xsks_fd_, &slot, &fd, BPF_ANY) != 0) return Status(errno);
  return Status::ok();
}

void XdpSteer::clear_socket(uint32_t slot) { (void)bpf_map_delete_elem(xsks_fd_, &slot); }

Status XdpSteer::steer(uint32_t qpn, uint32_t slot) {
  if (slot >= kMaxSockets) return Status(EINVAL);
  if (bpf_map_update_elem(qps_fd_, &qpn, &slot, BPF_ANY) != 0) return Status(errno);
  return Status::ok();
}

void XdpSteer::unsteer(uint32_t qpn) { (void)bpf_map_delete_elem(qps_fd_, &qpn); }

Status XdpSteer::set_raw_rule(uint32_t i, const RawRule& r) {
  if (i >= kMaxRawRules) return Status(ENOSPC);
  if (bpf_map_update_elem(raw_rules_fd_, &i, &r, BPF_ANY) != 0) return Status(errno);
  return Status::ok();
}

Status XdpSteer::set_raw_count(uint32_t n) {
  if (n > kMaxRawRules) return Status(ENOSPC);
  uint32_t zero = 0;
  if (bpf_map_update_elem(raw_count_fd_, &zero, &n, BPF_ANY) != 0) return Status(errno);
  return Status::ok();
}

XdpSteer::Counts XdpSteer::counts() const {
  Counts c;
  const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return c;
  std::vector<uint64_t> v(size_t(cpus), 0);
  uint32_t key = 0;
  if (bpf_map_lookup_elem(counts_fd_, &key, v.data()) == 0)
    for (uint64_t x : v) c.steered += x;
  key = 1;
  if (bpf_map_lookup_elem(counts_fd_, &key, v.data()) == 0)
    for (uint64_t x : v) c.passed += x;
  key = 2;
  if (bpf_map_lookup_elem(counts_fd_, &key, v.data()) == 0)
    for (uint64_t x : v) c.raw += x;
  return c;
}

}  // namespace uroce::daemon
