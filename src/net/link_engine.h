// Between a QP and the engine of the link that carries its send queue: the
// intra-host engine (core/shm_engine.h: shared memory, the initiator acting
// as the target's NIC) or the network one (NetQp: RoCE v2 over UDP sockets
// or AF_XDP). The QP (core::Qp) alone owns its state and its completions:
// an engine takes work from it (LinkEngine), asks it for the checks that
// are the QP's (local keys, local operations on its context's tables) and
// reports back what became of the work (QpOwner); it never writes the QP's
// state. As rxe's one rxe_qp_error() and rdma-core's provider ops tables.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

#include "contract/types.h"
#include "net/wr.h"

namespace uroce::core {

/// Why an engine gave up (QpOwner::failed).
struct QpFailure {
  /// The responder met an error (IBA 9.9.3): the owner hears `event`. False:
  /// the requester failed, which its error completion reports.
  bool responder = false;
  AsyncEvent event = AsyncEvent::kQpFatal;
  const char* why = "";  // for the trace
};

/// What a link engine asks of, and tells, the QP whose work it carries.
/// Called with the engine's own lock held (the QP's send lock for the
/// intra-host engine, the NetQp's for the network one): nothing here calls
/// back into an engine.
class QpOwner {
 public:
  /// The L_Key checks of a WQE's gather list (IBA 10.6.3.1) and its length
  /// against the QP's limits: kSuccess with the local buffers in loc[0,
  /// *nl) (at most kLimits.max_sge) and their total in *len, or the error
  /// the WQE completes with.
  virtual WcStatus check_local(const SendWqe& w, iovec* loc, size_t* nl, uint64_t* len) = 0;
  /// BIND_MW or LOCAL_INV on the QP's context (IBA 10.6.7): kSuccess or
  /// the error the WQE completes with.
  virtual WcStatus local_op(const SendWqe& w) = 0;
  /// A send WQE is done. Unsignaled (`signaled` false): no completion; the
  /// WQE's slot is retired with the next completion, *unsignaled counting
  /// them (the engine's, under its lock). A status other than success or
  /// WR_FLUSH_ERR is the engine's failure: the QP is in ERR before the
  /// completion can be seen (IBA 10.8.3), and failed() follows.
  virtual void completed(uint64_t wr_id, WcOpcode op, WcStatus st, uint32_t byte_len, bool signaled,
                         uint32_t* unsignaled) = 0;
  /// The engine gave up: a requester after completing its failed WQE and
  /// flushing the rest it held, a responder at once. The QP goes to ERR,
  /// its receives are flushed and a responder's event is raised.
  virtual void failed(const QpFailure& f) = 0;
  /// Draining (LinkEngine::drain): every WQE that had begun is complete.
  virtual void drained() = 0;

 protected:
  ~QpOwner() = default;
};

/// The engine of the link that carries a QP's send queue.
class LinkEngine {
 public:
  virtual ~LinkEngine() = default;
  /// A WQE the QP accepted (it may send, the opcode is legal for its type,
  /// the send queue has room). Completes through QpOwner::completed, now
  /// or later, in the order of posting.
  virtual void post(const SendWqe& w) = 0;
  /// The QP went to ERR: what is not complete finishes with WR_FLUSH_ERR
  /// (IBA 10.8.3.3), nothing new starts.
  virtual void flush() = 0;
  /// RTS -> SQD (`on`) and back: WQEs not begun wait; QpOwner::drained
  /// once every WQE that had begun is complete.
  virtual void drain(bool on) = 0;
};

}  // namespace uroce::core
