// The library's side of the control path: one connection per process to
// uroced, started on first use. Every call is a bounded request/reply.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "common/status.h"
#include "contract/device_info.h"
#include "contract/shm_layout.h"
#include "wire/flow_key.h"

namespace uroce::control {
struct Request;
}

namespace uroce::core {

class ControlClient {
 public:
  /// The process-wide client (connects, starting uroced if needed, on first call).
  static Result<ControlClient*> get();

  const std::vector<DeviceInfo>& devices() const { return devices_; }
  HostShm* host_shm() const { return host_shm_; }
  /// The control socket (the service thread watches it for hang-up).
  int fd() const { return fd_; }

  /// Registers a context segment; with `batch` (n > 0), also asks for QPNs
  /// for the QpShms at batch->off, + stride, ... (written to batch->qpns,
  /// their number to batch->got; 0 if refused: the context stands).
  struct QpnBatch {
    uint64_t off = 0;
    uint64_t stride = 0;
    uint32_t n = 0;
    uint32_t* qpns = nullptr;
    uint32_t got = 0;
  };
  Result<uint32_t> register_ctx(int memfd, QpnBatch* batch = nullptr);
  void unregister_ctx(uint32_t ctx_id);
  /// A QPN for the QpShm at `off`, or (is_srq) an XRC SRQ number for the RqRing at `off`.
  Result<uint32_t> alloc_qpn(uint32_t ctx_id, uint64_t off, bool is_srq = false);
  /// Up to `n` (<= control::kQpnBatchMax) QPNs for the QpShms at off,
  /// off + stride, ...; returns how many (>= 1), written to `qpns`.
  Result<uint32_t> alloc_qpns(uint32_t ctx_id, uint64_t off, uint64_t stride, uint32_t n, uint32_t* qpns);
  /// Posted: uroced sends no answer.
  void free_qpn(uint32_t qpn);
  /// Hands a destroyed network RC QP's receive socket to uroced, which
  /// answers the peer's duplicates of executed requests for a while (its
  /// last ACK may have been lost while this process goes away).
  void linger(int rx_fd, uint32_t qpn, uint32_t dest_qpn, uint32_t epsn, uint32_t msn, uint16_t sport,
              bool xrc);
  Result<uint32_t> alloc_key(uint32_t ctx_id, uint32_t slot);
  struct Resolved {
    int32_t pid;
    uint32_t ctx_id;
    uint64_t qp_off;
    int memfd;  // owned by the caller; -1 if the caller already maps ctx_id
  };
  Result<Resolved> resolve_qpn(uint32_t qpn, bool is_srq = false);
  /// Whether this daemon knows QP `qpn` (false only when it says it does
  /// not: ENOENT), without mapping anything of its owner.
  bool knows_qpn(uint32_t qpn);
  /// The host-wide XRC domain id for the file (dev, ino); (0, 0) = a new private one.
  Result<uint32_t> open_xrcd(uint64_t dev, uint64_t ino);
  /// A memfd holding uroced's report of the QPs and devices it serves
  /// (contract/report.h), the caller's to close.
  Result<int> report();
  /// The AF_XDP link (daemon/xdp_ports.h): an unbound AF_XDP socket for
  /// queue 0 of interface `ifindex` (the caller's), lent to this process;
  /// then, bound, it is put to use; then QP `qpn`'s frames go to it (`on`)
  /// or back to the kernel.
  Result<int> xsk_open(uint32_t ifindex);
  Status xsk_ready(uint32_t ifindex);
  Status xsk_steer(uint32_t ifindex, uint32_t qpn, bool on);
  /// kRawAccess: OK if this process may use raw Ethernet, else EPERM.
  Status raw_access();
  /// kRawRule: frames of interface `ifindex` that val/mask match go to this
  /// process's AF_XDP socket there (`on`), or rule `id` goes.
  Status raw_rule(uint32_t ifindex, uint64_t id, const wire::FlowKey& val, const wire::FlowKey& mask,
                  bool on);
  /// pthread_atfork child handler: drop the inherited connection.
  static void after_fork_child();

 private:
  ControlClient() = default;
  Status connect_or_spawn();
  Status hello();
  /// Maps uroced's table of the IPv4 identifications it saw (link/id_watch.h).
  void map_id_watch();
  void map_qp_directory();
  const void* map_table(const control::Request& req, size_t bytes, uint64_t magic, bool populate);

  std::mutex mu_;
  int fd_ = -1;
  std::vector<DeviceInfo> devices_;
  HostShm* host_shm_ = nullptr;
};

}  // namespace uroce::core
