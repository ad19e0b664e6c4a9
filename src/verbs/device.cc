// Device list, open/close, and every query verb (device, port, GID, P_Key).
#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/clock.h"
#include "common/export.h"
#include "common/log.h"
#include "contract/control_client.h"
#include "contract/control_protocol.h"
#include "contract/limits.h"
#include "contract/sysfs_attrs.h"
#include "core/qp.h"
#include "core/service.h"
#include "memory/notify.h"
#include "net/net_route.h"
#include "verbs/objects.h"
#include "verbs/sysfs_hook.h"

// verbs.h turns these names into inline wrappers; we define the real symbols.
#undef ibv_query_port
#undef ibv_get_device_list

namespace uroce::verbs {
namespace {

using core::kLimits;

/// The devices, built once per process from uroced's table and never freed
/// (programs keep ibv_device pointers after ibv_free_device_list).
struct DeviceTable {
  std::mutex mu;
  std::vector<UDevice*> devs;
  bool loaded = false;
  std::mutex ctx_mu;
  std::vector<UContext*> open_ctxs;
};
DeviceTable& table() {
  static DeviceTable* t = new DeviceTable();
  return *t;
}

/// uroced went away: like a NIC reset, every open context gets DEVICE_FATAL.
void on_daemon_death() {
  UROCE_ERR("uroced exited: devices are now in a fatal state");
  DeviceTable& t = table();
  std::lock_guard<std::mutex> g(t.ctx_mu);
  for (UContext* c : t.open_ctxs) {
    c->core->set_fatal();
    core::NotifyMsg m{core::kNotifyAsync, uint32_t(core::AsyncEvent::kDeviceFatal), 0};
    core::notify_post(getpid(), c->core->async_id(), m);
  }
}

int load_devices() {
  DeviceTable& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  if (t.loaded) return 0;
  auto cc = core::ControlClient::get();
  if (!cc.is_ok()) return cc.err();
  const auto& infos = cc.value()->devices();
  for (uint32_t i = 0; i < infos.size(); ++i) {
    auto* d = new UDevice();
    memset(&d->dev, 0, sizeof(d->dev));
    d->verbs_ops = nullptr;
    d->index = i;
    d->info = infos[i];
    d->dev.node_type = IBV_NODE_CA;
    d->dev.transport_type = IBV_TRANSPORT_IB;
    snprintf(d->dev.name, sizeof(d->dev.name), "%s", d->info.name);
    core::verbs_dev_name(i, d->dev.dev_name, sizeof(d->dev.dev_name));
    snprintf(d->dev.dev_path, sizeof(d->dev.dev_path), "/sys/class/infiniband_verbs/%s", d->dev.dev_name);
    snprintf(d->dev.ibdev_path, sizeof(d->dev.ibdev_path), "/sys/class/infiniband/%s", d->info.name);
    t.devs.push_back(d);
  }
  t.loaded = true;
  return 0;
}

UDevice* udev_of(ibv_context* c) { return uctx(c)->udev; }

}  // namespace

bool sysfs_virtual_read(const char* full_path, char* buf, size_t size, int* out_len) {
  static const char kPrefix[] = "/sys/class/infiniband/";
  if (strncmp(full_path, kPrefix, sizeof(kPrefix) - 1) != 0) return false;
  if (load_devices() != 0) return false;
  const char* rest = full_path + sizeof(kPrefix) - 1;
  for (UDevice* d : table().devs) {
    size_t n = strlen(d->info.name);
    if (strncmp(rest, d->info.name, n) != 0 || rest[n] != '/') continue;
    const char* attr = rest + n + 1;
    while (*attr == '/') ++attr;
    std::string val;
    if (!core::sysfs_attr(d->info, attr, &val)) {
      *out_len = -1;
      errno = ENOENT;
      return true;
    }
    const size_t len = val.size();
    if (len + 1 > size) {
      *out_len = -1;
      errno = EOVERFLOW;
      return true;
    }
    memcpy(buf, val.c_str(), len + 1);
    *out_len = int(len);
    return true;
  }
  return false;
}

UROCE_EXPORT ibv_device** ibv_get_device_list(int* num_devices) {
  int err = load_devices();
  DeviceTable& t = table();
  if (err == EACCES) {
    // The daemon of that name belongs to another user (daemon/peer_check.h):
    // as rdma-core when the user may not use the device files.
    UROCE_ERR("uroced %s serves another user: permission denied", control::daemon_socket_name().c_str());
    errno = EACCES;
    return nullptr;
  }
  if (err) {
    // No uroced, no devices: rdma-core says "no devices" with an empty list.
    UROCE_WARN("no devices: uroced unavailable (%s)", strerror(err));
  }
  auto** list = static_cast<ibv_device**>(calloc(t.devs.size() + 1, sizeof(ibv_device*)));
  if (!list) {
    errno = ENOMEM;
    return nullptr;
  }
  for (size_t i = 0; i < t.devs.size(); ++i) list[i] = &t.devs[i]->dev;
  if (num_devices) *num_devices = int(t.devs.size());
  return list;
}

UROCE_EXPORT void ibv_free_device_list(ibv_device** list) { free(list); }

UROCE_EXPORT const char* ibv_get_device_name(ibv_device* device) { return device ? device->name : nullptr; }

UROCE_EXPORT __be64 ibv_get_device_guid(ibv_device* device) {
  // node_guid holds the EUI-64 bytes in wire order, which is what __be64 means.
  return reinterpret_cast<UDevice*>(device)->info.node_guid;
}

UROCE_EXPORT int ibv_get_device_index(ibv_device* device) {
  return int(reinterpret_cast<UDevice*>(device)->index);
}

namespace {

/// A program's handle on core context `core`: ibv_open_device's, or one
/// that ibv_import_device made from its cmd_fd (then `shared` is the
/// original's and `cmd_fd` the program's dup, which this context owns).
ibv_context* publish_context(UDevice* d, std::shared_ptr<core::Context> core,
                             std::shared_ptr<SharedObjects> shared, int cmd_fd) {
  struct stat st {};
  if (fstat(cmd_fd, &st) != 0) {
    close(cmd_fd);
    return nullptr;
  }
  auto* c = new UContext();
  memset(&c->vctx, 0, sizeof(c->vctx));
  c->udev = d;
  c->core = std::move(core);
  c->shared = std::move(shared);
  c->cmd_dev = st.st_dev;
  c->cmd_ino = st.st_ino;
  ibv_context* ctx = &c->vctx.context;
  ctx->device = &d->dev;
  ctx->cmd_fd = cmd_fd;
  ctx->async_fd = c->core->async_fd();
  ctx->num_comp_vectors = int(kLimits.num_comp_vectors);
  pthread_mutex_init(&ctx->mutex, nullptr);
  init_context_ops(c);
  // Watch this process's control connection (new after a fork) for uroced's death.
  core::Service::get().watch_daemon(c->core->ctl()->fd(), on_daemon_death);
  DeviceTable& t = table();
  std::lock_guard<std::mutex> g(t.ctx_mu);
  t.open_ctxs.push_back(c);
  return ctx;
}

}  // namespace

UROCE_EXPORT ibv_context* ibv_open_device(ibv_device* device) {
  if (!device) {
    errno = EINVAL;
    return nullptr;
  }
  auto* d = reinterpret_cast<UDevice*>(device);
  auto core = core::Context::open(d->info);
  if (!core.is_ok()) {
    errno = core.err();
    return nullptr;
  }
  // A real descriptor, as the uverbs char device would be, and a file of
  // its own (a memfd has an inode of its own), so that ibv_import_device
  // can tell which context a dup of it names. Nothing is ever written to
  // it (the control path is uroced's socket).
  int cmd_fd = memfd_create("uroce-context", MFD_CLOEXEC);
  const bool importable = cmd_fd >= 0;
  if (!importable) cmd_fd = eventfd(0, EFD_CLOEXEC);  // memfd refused (a seccomp filter): no imports
  if (cmd_fd < 0) return nullptr;
  ibv_context* ctx = publish_context(d, std::shared_ptr<core::Context>(std::move(core.value())),
                                     std::make_shared<SharedObjects>(), cmd_fd);
  if (ctx && !importable) uctx(ctx)->cmd_dev = uctx(ctx)->cmd_ino = 0;
  return ctx;
}

/// ibv_import_device(3): another handle on the context whose cmd_fd this
/// is a dup of; its PDs, MRs and DMs can then be imported by handle. Within
/// the process that opened it: a dup received from another process names a
/// context uroce cannot share (its queues and keys live in that process's
/// segment, reached through that process's library): EOPNOTSUPP.
UROCE_EXPORT ibv_context* ibv_import_device(int cmd_fd) {
  struct stat st {};
  if (fstat(cmd_fd, &st) != 0) return nullptr;  // EBADF
  std::shared_ptr<core::Context> core;
  std::shared_ptr<SharedObjects> shared;
  UDevice* d = nullptr;
  {
    DeviceTable& t = table();
    std::lock_guard<std::mutex> g(t.ctx_mu);
    for (UContext* c : t.open_ctxs) {
      if (c->vctx.context.cmd_fd == cmd_fd) {  // not a dup (the man page asks for one): it has an owner
        errno = EINVAL;
        return nullptr;
      }
      if (c->cmd_ino && c->cmd_dev == uint64_t(st.st_dev) && c->cmd_ino == uint64_t(st.st_ino)) {
        core = c->core;
        shared = c->shared;
        d = c->udev;
      }
    }
  }
  if (!core) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return publish_context(d, std::move(core), std::move(shared), cmd_fd);
}

UROCE_EXPORT int ibv_close_device(ibv_context* context) {
  UContext* c = uctx(context);
  {
    DeviceTable& t = table();
    std::lock_guard<std::mutex> g(t.ctx_mu);
    std::erase(t.open_ctxs, c);
  }
  pthread_mutex_destroy(&context->mutex);
  if (context->cmd_fd >= 0) close(context->cmd_fd);
  delete c;  // the core context goes with the last context that shares it
  return 0;
}

static void fill_device_attr(UDevice* d, ibv_device_attr* a) {
  memset(a, 0, sizeof(*a));
  snprintf(a->fw_ver, sizeof(a->fw_ver), "0.1.0");
  a->node_guid = d->info.node_guid;
  a->sys_image_guid = d->info.node_guid;
  a->max_mr_size = kLimits.max_mr_size;
  a->page_size_cap = kLimits.page_size_cap;
  a->vendor_id = kLimits.vendor_id;
  a->vendor_part_id = kLimits.vendor_part_id;
  a->hw_ver = kLimits.hw_ver;
  a->max_qp = int(kLimits.max_qp);
  a->max_qp_wr = int(kLimits.max_qp_wr);
  a->device_cap_flags = IBV_DEVICE_BAD_PKEY_CNTR | IBV_DEVICE_BAD_QKEY_CNTR | IBV_DEVICE_SYS_IMAGE_GUID |
                        IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_N_NOTIFY_CQ | IBV_DEVICE_XRC |
                        IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_CHANGE_PHY_PORT | IBV_DEVICE_MEM_WINDOW |
                        IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_MANAGED_FLOW_STEERING;
  a->max_sge = int(kLimits.max_sge);
  a->max_sge_rd = int(kLimits.max_sge_rd);
  a->max_cq = int(kLimits.max_cq);
  a->max_cqe = int(kLimits.max_cqe);
  a->max_mr = int(kLimits.max_mr);
  a->max_pd = int(kLimits.max_pd);
  a->max_qp_rd_atom = int(kLimits.max_qp_rd_atom);
  a->max_ee_rd_atom = 0;
  a->max_res_rd_atom = int(kLimits.max_res_rd_atom);
  a->max_qp_init_rd_atom = int(kLimits.max_qp_init_rd_atom);
  a->max_ee_init_rd_atom = 0;
  a->atomic_cap = IBV_ATOMIC_HCA;
  a->max_ee = 0;
  a->max_rdd = 0;
  a->max_mw = int(kLimits.max_mr);  // windows take MR-table slots
  a->max_raw_ipv6_qp = 0;
  a->max_raw_ethy_qp = 0;
  // Multicast groups are joined on the network link (core/qp_send.cc, Qp::attach_mcast).
  if (core::ud_on_network(d->info)) {
    a->max_mcast_grp = int(kLimits.max_mcast_grp);
    a->max_mcast_qp_attach = int(kLimits.max_mcast_qp_attach);
    a->max_total_mcast_qp_attach = int(kLimits.max_total_mcast_qp_attach);
  }
  a->max_ah = int(kLimits.max_ah);
  a->max_fmr = 0;
  a->max_map_per_fmr = 0;
  a->max_srq = int(kLimits.max_srq);
  a->max_srq_wr = int(kLimits.max_srq_wr);
  a->max_srq_sge = int(kLimits.max_srq_sge);
  a->max_pkeys = uint16_t(kLimits.max_pkeys);
  a->local_ca_ack_delay = 15;
  a->phys_port_cnt = 1;
}

UROCE_EXPORT int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
  fill_device_attr(udev_of(context), attr);
  return 0;
}

int op_query_device_ex(ibv_context* ctx, const ibv_query_device_ex_input* in, ibv_device_attr_ex* attr,
                       size_t attr_len) {
  if (in && in->comp_mask) return EINVAL;
  if (attr_len < sizeof(ibv_device_attr)) return EINVAL;
  ibv_device_attr_ex ex;
  memset(&ex, 0, sizeof(ex));
  fill_device_attr(udev_of(ctx), &ex.orig_attr);
  ex.completion_timestamp_mask = ~uint64_t(0);
  ex.hca_core_clock = kLimits.hca_core_clock_khz;
  ex.device_cap_flags_ex = ex.orig_attr.device_cap_flags;
  ex.max_dm_size = kLimits.max_dm_size;
  // On-demand paging (core/context.cc share_pages): every transport, and
  // implicit regions (the whole address space, local access).
  constexpr uint32_t kOdpAll = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
                               IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
  ex.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
  ex.odp_caps.per_transport_caps.rc_odp_caps = kOdpAll;
  ex.odp_caps.per_transport_caps.uc_odp_caps =
      IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE;
  ex.odp_caps.per_transport_caps.ud_odp_caps =
      IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;
  ex.xrc_odp_caps = kOdpAll;
  // Packet pacing of raw QPs' sends (net/raw_engine.h), as mlx5 offers it.
  ex.packet_pacing_caps.qp_rate_limit_min = kLimits.qp_rate_limit_min_kbps;
  ex.packet_pacing_caps.qp_rate_limit_max = kLimits.qp_rate_limit_max_kbps;
  ex.packet_pacing_caps.supported_qpts = 1u << IBV_QPT_RAW_PACKET;
  ex.phys_port_cnt_ex = 1;
  memcpy(attr, &ex, std::min(attr_len, sizeof(ex)));
  return 0;
}

/// ibv_query_rt_values_ex: the device clock that stamps completions
/// (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP), in its units (ns: hca_core_clock
/// is 1 GHz), as mlx5 reports it: tv_sec 0, the count in tv_nsec.
int op_query_rt_values(ibv_context*, ibv_values_ex* values) {
  if (values->comp_mask & ~uint32_t(IBV_VALUES_MASK_RAW_CLOCK)) return EINVAL;
  const uint32_t asked = values->comp_mask;
  values->comp_mask = 0;
  if (asked & IBV_VALUES_MASK_RAW_CLOCK) {
    values->raw_clock.tv_sec = 0;
    values->raw_clock.tv_nsec = long(now_ns());
    values->comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
  }
  return 0;
}

static void fill_port_attr(UDevice* d, ibv_port_attr* a) {
  memset(a, 0, sizeof(*a));
  a->state = IBV_PORT_ACTIVE;
  a->max_mtu = IBV_MTU_4096;
  a->active_mtu = ibv_mtu(core::active_mtu_enum(d->info.if_mtu));
  a->gid_tbl_len = int(kLimits.gid_tbl_len);
  a->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
  a->max_msg_sz = kLimits.max_msg_sz;
  a->bad_pkey_cntr = 0;
  a->qkey_viol_cntr = 0;
  a->pkey_tbl_len = uint16_t(kLimits.max_pkeys);
  a->lid = 0;
  a->sm_lid = 0;
  a->lmc = 0;
  a->max_vl_num = 1;
  a->sm_sl = 0;
  a->subnet_timeout = 0;
  a->init_type_reply = 0;
  a->active_width = 2;   // 4X
  a->active_speed = 32;  // EDR (25 Gb/s per lane)
  a->phys_state = 5;     // LinkUp
  a->link_layer = IBV_LINK_LAYER_ETHERNET;
  a->flags = 0;
  a->port_cap_flags2 = 0;
}

int op_query_port(ibv_context* ctx, uint8_t port, ibv_port_attr* attr, size_t attr_len) {
  if (port != 1) return EINVAL;
  ibv_port_attr a;
  fill_port_attr(udev_of(ctx), &a);
  memcpy(attr, &a, std::min(attr_len, sizeof(a)));
  return 0;
}

// Binaries built against old headers call the exported symbol with the old,
// smaller struct (up to link_layer); write only that much.
UROCE_EXPORT int ibv_query_port(ibv_context* context, uint8_t port_num, _compat_ibv_port_attr* port_attr) {
  return op_query_port(context, port_num, reinterpret_cast<ibv_port_attr*>(port_attr),
                       offsetof(ibv_port_attr, port_cap_flags2));
}

UROCE_EXPORT int ibv_query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
  UDevice* d = udev_of(context);
  if (port_num != 1 || index < 0 || uint32_t(index) >= kLimits.gid_tbl_len) return -1;
  memset(gid, 0, sizeof(*gid));
  if (uint32_t(index) < d->info.num_gids) memcpy(gid->raw, d->info.gids[index], 16);
  return 0;
}

UROCE_EXPORT int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index,
                                    unsigned int* type) {
  UDevice* d = udev_of(context);
  if (port_num != 1 || index >= d->info.num_gids) {
    errno = EINVAL;
    return -1;
  }
  *type = d->info.gid_types[index];
  return 0;
}

static void fill_gid_entry(UDevice* d, ibv_context* ctx, uint32_t index, ibv_gid_entry* e) {
  memset(e, 0, sizeof(*e));
  memcpy(e->gid.raw, d->info.gids[index], 16);
  e->gid_index = index;
  e->port_num = 1;
  e->gid_type = d->info.gid_types[index] == uint32_t(core::GidType::kRoceV2) ? IBV_GID_TYPE_ROCE_V2
                                                                             : IBV_GID_TYPE_ROCE_V1;
  e->ndev_ifindex = d->info.ifindex;
}

UROCE_EXPORT int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index,
                                   ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
  UDevice* d = udev_of(context);
  if (flags) return EINVAL;
  if (port_num != 1) return EINVAL;
  if (entry_size < sizeof(ibv_gid_entry)) return EINVAL;
  if (gid_index >= d->info.num_gids) return ENODATA;
  fill_gid_entry(d, context, gid_index, entry);
  return 0;
}

UROCE_EXPORT ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries,
                                          uint32_t flags, size_t entry_size) {
  UDevice* d = udev_of(context);
  if (flags || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
  size_t n = 0;
  for (uint32_t i = 0; i < d->info.num_gids; ++i) {
    if (n >= max_entries) return -EINVAL;
    fill_gid_entry(d, context, i,
                   reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<char*>(entries) + n * entry_size));
    ++n;
  }
  return ssize_t(n);
}

UROCE_EXPORT int ibv_query_pkey(ibv_context* context, uint8_t port_num, int index, __be16* pkey) {
  if (port_num != 1 || index < 0 || uint32_t(index) >= kLimits.max_pkeys) return -1;
  *pkey = htons(0xffff);
  return 0;
}

UROCE_EXPORT int ibv_get_pkey_index(ibv_context* context, uint8_t port_num, __be16 pkey) {
  if (port_num != 1) return -EINVAL;
  // The default P_Key, full or limited membership, is index 0.
  return (ntohs(pkey) & 0x7fff) == 0x7fff ? 0 : -ENOENT;
}

UROCE_EXPORT int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  core::NotifyMsg m;
  for (;;) {
    ssize_t n = recv(context->async_fd, &m, sizeof(m), 0);
    if (n < 0) return -1;  // EAGAIN, or EINTR: as rdma-core's read() of the kernel's fd
    if (n != sizeof(m) || m.kind != core::kNotifyAsync) continue;
    break;
  }
  memset(event, 0, sizeof(*event));
  event->event_type = ibv_event_type(m.event);
  switch (event->event_type) {
    case IBV_EVENT_CQ_ERR:
      event->element.cq = reinterpret_cast<ibv_cq*>(m.handle);
      break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      event->element.srq = reinterpret_cast<ibv_srq*>(m.handle);
      break;
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
    case IBV_EVENT_GID_CHANGE:
      event->element.port_num = 1;
      break;
    case IBV_EVENT_DEVICE_FATAL:
      break;
    default:
      event->element.qp = reinterpret_cast<ibv_qp*>(m.handle);
      break;
  }
  return 0;
}

UROCE_EXPORT void ibv_ack_async_event(ibv_async_event* event) { (void)event; }

}  // namespace uroce::verbs
