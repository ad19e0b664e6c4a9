// uroced's state: clients, their context segments, QPN ownership and keys.
// Pure bookkeeping; the socket loop lives in uroced_main.cc.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "common/status.h"
#include "core/shm_layout.h"

namespace uroce::daemon {

struct CtxRecord {
  uint32_t ctx_id = 0;
  int client_fd = -1;
  int memfd = -1;
  int32_t pid = 0;
  core::SegHeader* seg = nullptr;  // uroced's own mapping of the segment
  std::set<uint32_t> qpns;
};

class Registry {
 public:
  ~Registry();

  /// Maps and records a client's context segment; returns its ctx_id.
  Result<uint32_t> register_ctx(int client_fd, int32_t pid, int memfd);
  void unregister_ctx(int client_fd, uint32_t ctx_id);
  /// Allocates a QPN (24-bit, never 0 or 1, unused) for a QP at `qp_off` of `ctx_id`.
  Result<uint32_t> alloc_qpn(int client_fd, uint32_t ctx_id, uint64_t qp_off, bool is_srq = false);
  void free_qpn(int client_fd, uint32_t qpn);
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
  /// The XRC domain for a file (dev, ino); processes opening the same file share it.
  uint32_t open_xrcd(uint64_t dev, uint64_t ino);
  /// A client's control socket closed: its process is gone (or gave up). Marks
  /// its segments dead and its QPs in error so peers get errors, frees its QPNs.
  void client_gone(int client_fd);
  size_t num_ctxs() const { return ctxs_.size(); }

 private:
  CtxRecord* find_ctx(int client_fd, uint32_t ctx_id);
  void drop_ctx(CtxRecord& c, bool dead);

  std::map<uint32_t, CtxRecord> ctxs_;
  struct QpnRecord {
    uint32_t ctx_id;
    uint64_t off;
    bool is_srq;  // an XRC SRQ number: off is its RqRing, not a QpShm
  };
  std::map<uint32_t, QpnRecord> qpns_;  // qpn / srqn -> owner
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> xrcds_;
  uint32_t next_xrcd_ = 1;
  uint32_t next_ctx_id_ = 1;
  // QP numbers start at a random point (like a NIC after a reset), so
  // that two uroceds on one host (two users, or parallel tests) rarely
  // hand out the same numbers: RoCE v2 flows take their UDP source port
  // from the QPNs (docs/network-link.md, "Demultiplexing").
  uint32_t next_qpn_ = first_qpn();
  static uint32_t first_qpn();
};

}  // namespace uroce::daemon
