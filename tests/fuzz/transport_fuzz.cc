// Fuzz target: packets from a hostile peer into every transport role. The
// input is a configuration byte, then records [length: 2 bytes, big-endian]
// [UDP payload], each decoded and, if it decodes, handed to an RC responder
// (and one that keeps packets past a gap), a UC responder, a UD responder and an RC requester with WQEs of
// every kind outstanding (whose timers run between packets). The environments hand out memory only from heap
// buffers of exact size, so the sanitizers catch any access outside a registered region or receive buffer;
// every packet the state machines send must encode.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "transport/rc_requester.h"
#include "transport/rc_responder.h"
#include "transport/uc_responder.h"
#include "transport/ud_responder.h"
#include "wire/packet.h"

using namespace uroce;
using namespace uroce::transport;

namespace {

constexpr uint64_t kVa = 0x10000;
constexpr uint32_t kRkey = 0x1234;
constexpr size_t kRegion = 8192;

void must_encode(wire::Packet& p) {
  std::vector<uint8_t> out(wire::encoded_size(p) + wire::kIcrcBytes);
  if (out.size() == wire::kIcrcBytes || wire::encode(p, out.data(), out.size()) == 0) __builtin_trap();
}

struct Env : RequesterEnv, ResponderEnv {
  std::vector<uint8_t> region = std::vector<uint8_t>(kRegion);
  std::vector<std::vector<uint8_t>> recvs;
  uint32_t recv_budget = 0;

  // Responder side
  bool claim_recv(RecvTarget* out) override {
    if (recv_budget == 0) return false;
    --recv_budget;
    recvs.emplace_back(1500);
    out->wr_id = recvs.size();
    out->handle = recvs.size() - 1;
    return true;
  }
  Access place_recv(const RecvTarget& r, uint64_t off, std::span<const uint8_t> b) override {
    std::vector<uint8_t>& buf = recvs.at(r.handle);
    if (off > buf.size() || b.size() > buf.size() - off) return Access::kLengthError;
    if (!b.empty()) memcpy(buf.data() + off, b.data(), b.size());
    return Access::kOk;
  }
  void complete_recv(const RecvTarget& r, transport::WcStatus, uint32_t, const RecvInfo&) override {
    if (r.handle >= recvs.size()) __builtin_trap();
  }
  uint8_t* remote_memory(uint32_t rkey, uint64_t va, uint64_t len, uint32_t) override {
    if (rkey != kRkey || va < kVa || len > kRegion || va - kVa > kRegion - len) return nullptr;
    return region.data() + (va - kVa);
  }
  uint64_t atomic(uint8_t* at, bool cas, uint64_t compare_add, uint64_t swap) override {
    if (at < region.data() || at + 8 > region.data() + region.size()) __builtin_trap();
    uint64_t v;
    memcpy(&v, at, 8);
    const uint64_t nv = cas ? (v == compare_add ? swap : v) : v + compare_add;
    memcpy(at, &nv, 8);
    return v;
  }
  void send(wire::Packet& p) override { must_encode(p); }
  void qp_error(transport::AsyncEvent) override {}
  // Requester side
  void complete(const SqWqe&, transport::WcStatus, uint32_t) override {}
  void qp_error() override {}
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t cfg = data[0];
  const uint32_t pmtu = pmtu_bytes(1 + cfg % 5);
  Env env;
  env.recv_budget = (cfg >> 3) & 7;

  ResponderConfig rc;
  rc.pmtu = pmtu;
  rc.dest_qp = 7;
  rc.epsn = 100;
  rc.max_dest_rd_atomic = 1 + ((cfg >> 6) & 3);
  RcResponder rc_resp(rc, &env);
  ResponderConfig keep = rc;  // selective repeat: packets past a gap kept and replayed
  keep.keep_ooo = 64;
  RcResponder rc_keep(keep, &env);
  UcResponder uc_resp(rc, &env);
  UdResponder ud_resp(0x11111111, &env);

  RequesterConfig qc;
  qc.pmtu = pmtu;
  qc.dest_qp = 9;
  qc.sq_psn = 100;
  qc.timeout_ns = 1000;
  qc.retry_cnt = 3;
  qc.rnr_retry = 3;
  qc.max_rd_atomic = 2;
  qc.reorder_ns = (cfg & 2) ? 100 : 0;  // a NAK waits out reordering (shares a bit with the PMTU's choice)
  RcRequester req(qc, &env);
  req.set_selective(cfg & 1);  // NAKs resend holes alone (shares the bit with the PMTU's choice)
  // Local buffers of exact size: the requester writes READ data and atomic
  // results only inside them.
  std::vector<uint8_t> send_buf(3000, 1), read_buf(3000), atomic_buf(8);
  const MsgKind kinds[] = {MsgKind::kSend,       MsgKind::kWrite,    MsgKind::kReadRequest,
                           MsgKind::kFetchAdd,   MsgKind::kWriteImm, MsgKind::kReadRequest,
                           MsgKind::kCompareSwap};
  uint64_t now = 1;
  for (MsgKind k : kinds) {
    SqWqe w;
    w.kind = k;
    w.wr_id = uint64_t(k);
    w.remote_va = kVa;
    w.rkey = kRkey;
    if (k == MsgKind::kReadRequest) {
      w.len = uint32_t(read_buf.size());
      w.local.push_back(iovec{read_buf.data(), read_buf.size()});
    } else if (k == MsgKind::kFetchAdd || k == MsgKind::kCompareSwap) {
      w.len = 8;
      w.local.push_back(iovec{atomic_buf.data(), atomic_buf.size()});
    } else {
      w.len = uint32_t(send_buf.size());
      w.local.push_back(iovec{send_buf.data(), send_buf.size()});
    }
    req.post(std::move(w), now);
  }

  const uint8_t grh[wire::kGrhBytes] = {};
  size_t at = 1;
  while (at + 2 <= size) {
    const size_t n = size_t(data[at]) << 8 | data[at + 1];
    at += 2;
    if (n > size - at) break;
    // A copy of exactly the record, so reading past it is caught.
    std::vector<uint8_t> pkt(data + at, data + at + n);
    at += n;
    wire::Packet p;
    if (wire::decode({pkt.data(), pkt.size()}, &p) != wire::DecodeError::kNone) continue;
    rc_resp.on_request(p);
    rc_keep.on_request(p);
    uc_resp.on_request(p);
    ud_resp.on_request(p, grh);
    req.on_response(p, now);
    now += 700;
    if (req.next_deadline() <= now) req.on_timer(now);
  }
  return 0;
}
