// uroced's state: clients, their context segments, QPN ownership and keys.
// Pure bookkeeping; the socket loop lives in uroced_main.cc.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/fn_ref.h"
#include "common/status.h"
#include "contract/limits.h"
#include "contract/qp_directory.h"
#include "contract/report.h"
#include "contract/shm_layout.h"

namespace uroce::daemon {

struct CtxRecord {
  uint32_t ctx_id = 0;
  int client_fd = -1;
  int memfd = -1;
  int32_t pid = 0;
  core::SegHeader* seg = nullptr;  // uroced's own mapping of the segment
  std::set<uint32_t> qpns;
};

/// What one client (a connection: one process) and all of them may hold.
/// Beyond a client's share: ENOMEM, as a device past max_qp answers; beyond
/// the daemon's: EAGAIN, as the kernel's rdma cgroup does.
struct RegistryLimits {
  uint32_t ctxs_per_client = 1024;
  uint32_t ctxs = 8192;  // each reserves kSegReserveBytes of uroced's address space
  uint32_t qpns_per_client = core::kLimits.max_qp + core::kLimits.max_srq;
  uint32_t qpns = 1u << 20;
  uint32_t xrcds_per_client = 1024;
};

class Registry {
 public:
  explicit Registry(RegistryLimits limits = {});
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  /// Maps and records a client's context segment (`memfd`, which this call
  /// owns: a memfd sealed against shrinking, so that uroced's stores into
  /// it can never fault); returns its ctx_id.
  Result<uint32_t> register_ctx(int client_fd, int32_t pid, int memfd);
  void unregister_ctx(int client_fd, uint32_t ctx_id);
  /// Allocates a QPN (24-bit, never 0 or 1, unused) for a QP at `qp_off` of
  /// `ctx_id` (an XRC SRQ's RqRing if `is_srq`), which must lie inside the segment.
  Result<uint32_t> alloc_qpn(int client_fd, uint32_t ctx_id, uint64_t qp_off, bool is_srq = false);
  /// Up to `n` QPNs for the QPs at off, off + stride, ... (as many as the
  /// limits allow, at least one: else the error), written to `out`.
  Result<uint32_t> alloc_qpns(int client_fd, uint32_t ctx_id, uint64_t off, uint64_t stride, uint32_t n,
                              bool is_srq, uint32_t* out);
  void free_qpn(int client_fd, uint32_t qpn);
  /// Whether QP number `qpn` (not an XRC SRQ's) is one of `client_fd`'s.
  bool owns_qpn(int client_fd, uint32_t qpn);
  /// A key for MR table slot `slot`: the slot in the low bits, random high bits.
  Result<uint32_t> alloc_key(int client_fd, uint32_t ctx_id, uint32_t slot);
  struct Resolved {
    int32_t pid;
    uint32_t ctx_id;
    uint64_t qp_off;
    int memfd;
  };
  /// Resolves a QPN, or (want_srq) an XRC SRQ number; the kind must match.
  Result<Resolved> resolve_qpn(uint32_t qpn, bool want_srq = false) const;
  /// The XRC domain for a file (dev, ino); processes opening the same file
  /// share it while one of them is connected.
  Result<uint32_t> open_xrcd(int client_fd, uint64_t dev, uint64_t ino);
  /// A client's control socket closed: its process is gone (or gave up). Marks
  /// its segments dead and its QPs in error so peers get errors, frees its QPNs.
  void client_gone(int client_fd);
  size_t num_ctxs() const { return ctxs_.size(); }
  size_t num_qpns() const { return qpns_.size(); }
  size_t num_xrcds() const { return xrcds_.size(); }
  /// A read-only descriptor of the QP directory (contract/qp_directory.h) to
  /// pass to a client (still this registry's), or -1 without one.
  int directory_fd() const { return dir_ro_fd_; }
  const core::QpDirectory* directory() const { return dir_; }
  /// A memfd holding the report of every QP and device (contract/report.h), or
  /// -1. Reads what clients wrote in their segments, bounds-checked.
  int report(int32_t uroced_pid) const;

 private:
  CtxRecord* find_ctx(int client_fd, uint32_t ctx_id);
  void drop_ctx(CtxRecord& c, bool dead);
  /// Calls `retired` with a context's retired counters (if it has them) and
  /// `qp` for each of its QPs with the QP's counters (or null).
  void visit_ctx(const CtxRecord& c, FnRef<void(const core::NetCounters&)> retired,
                 FnRef<void(uint32_t, const core::QpShm&, const core::NetCounters*)> qp) const;
  /// A context's counters (retired block and live QPs') as they stand, added to `into`.
  void add_ctx_counters(const CtxRecord& c, core::NetCounters* into) const;
  /// What contexts that are gone counted, by device name.
  std::map<std::string, core::NetCounters> retired_;

  struct ClientShare {
    uint32_t ctxs = 0;
    uint32_t qpns = 0;
    std::set<std::pair<uint64_t, uint64_t>> xrcds;
  };
  RegistryLimits limits_;
  std::map<int, ClientShare> clients_;

  std::map<uint32_t, CtxRecord> ctxs_;
  struct QpnRecord {
    uint32_t ctx_id;
    uint64_t off;
    bool is_srq;  // an XRC SRQ number: off is its RqRing, not a QpShm
  };
  std::map<uint32_t, QpnRecord> qpns_;  // qpn / srqn -> owner
  struct XrcdRecord {
    uint32_t id;
    uint32_t users;  // clients that opened it
  };
  std::map<std::pair<uint64_t, uint64_t>, XrcdRecord> xrcds_;
  uint32_t next_xrcd_ = 1;
  uint32_t next_ctx_id_ = 1;
  // QP numbers are drawn at random from the 24-bit space (0, 1 and the
  // multicast QPN excepted; docs/intra-host-link.md, "Keys and QP numbers"):
  // another process cannot guess the next one, and two uroceds on one host
  // (two users, or parallel tests) rarely hand out the same numbers — RoCE v2
  // flows take their UDP source port from the QPNs (docs/network-link.md,
  // "Demultiplexing").
  uint32_t random_qpn();
  static constexpr uint32_t kRandomBatch = 16;
  uint32_t random_[kRandomBatch] = {};
  uint32_t random_left_ = 0;
  /// Records a QPN's owner (or, with pid 0, its end) in the directory.
  void publish(uint32_t qpn, uint32_t ctx_id, int32_t pid, uint64_t off, bool is_srq);
  int dir_fd_ = -1;
  int dir_ro_fd_ = -1;
  core::QpDirectory* dir_ = nullptr;  // uroced's writable mapping
};

}  // namespace uroce::daemon
