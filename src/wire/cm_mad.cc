#include "wire/cm_mad.h"

#include <cstring>

namespace uroce::wire::cm {
namespace {

// A field: `bits` bits starting `bit` bits after the most significant bit of
// byte `off` of the message (after the MAD header), as the IBTA tables give
// them. Values are big-endian across bytes.
uint64_t get(const uint8_t* msg, size_t off, unsigned bit, unsigned bits) {
  uint64_t v = 0;
  for (unsigned i = 0; i < bits; ++i) {
    const unsigned p = bit + i;
    v = v << 1 | ((msg[off + p / 8] >> (7 - p % 8)) & 1u);
  }
  return v;
}

void put(uint8_t* msg, size_t off, unsigned bit, unsigned bits, uint64_t v) {
  for (unsigned i = 0; i < bits; ++i) {
    const unsigned p = bit + i;
    const uint8_t mask = uint8_t(0x80u >> (p % 8));
    if ((v >> (bits - 1 - i)) & 1u)
      msg[off + p / 8] |= mask;
    else
      msg[off + p / 8] &= uint8_t(~mask);
  }
}

// Whole-byte fields.
uint64_t getb(const uint8_t* m, size_t off, unsigned bytes) { return get(m, off, 0, bytes * 8); }
void putb(uint8_t* m, size_t off, unsigned bytes, uint64_t v) { put(m, off, 0, bytes * 8, v); }

void encode_header(const MadHeader& h, Attr attr, uint8_t* mad) { encode_mad_header(h, uint16_t(attr), mad); }

/// The message after a header that is the CM's and names `attr`.
const uint8_t* body(ConstMad in, Attr attr) {
  MadHeader h;
  if (!decode_header(in, &h) || h.attr_id != uint16_t(attr)) return nullptr;
  return in.data() + kMadHeaderSize;
}

template <size_t N>
void put_bytes(uint8_t* m, size_t off, const uint8_t (&src)[N]) {
  memcpy(m + off, src, N);
}
template <size_t N>
void get_bytes(const uint8_t* m, size_t off, uint8_t (&dst)[N]) {
  memcpy(dst, m + off, N);
}

}  // namespace

void encode_mad_header(const MadHeader& h, uint16_t attr, uint8_t* mad) {
  memset(mad, 0, kMadSize);
  mad[0] = h.base_version;
  mad[1] = h.mgmt_class;
  mad[2] = h.class_version;
  mad[3] = h.method;
  putb(mad, 4, 2, h.status);
  putb(mad, 6, 2, h.class_specific);
  putb(mad, 8, 8, h.tid);
  putb(mad, 16, 2, attr);
  putb(mad, 20, 4, h.attr_mod);
}

bool read_mad_header(ConstMad in, MadHeader* h) {
  if (in.size() < kMadSize) return false;
  const uint8_t* p = in.data();
  h->base_version = p[0];
  h->mgmt_class = p[1];
  h->class_version = p[2];
  h->method = p[3];
  h->status = uint16_t(getb(p, 4, 2));
  h->class_specific = uint16_t(getb(p, 6, 2));
  h->tid = getb(p, 8, 8);
  h->attr_id = uint16_t(getb(p, 16, 2));
  h->attr_mod = uint32_t(getb(p, 20, 4));
  return true;
}

bool decode_header(ConstMad in, MadHeader* h) {
  if (!read_mad_header(in, h)) return false;
  return h->base_version == kBaseVersion && h->mgmt_class == kClassCm &&
         h->class_version == kCmClassVersion && h->method == kMethodSend;
}

// REQ (Table 103).
void encode(const MadHeader& h, const Req& r, Mad out) {
  encode_header(h, Attr::kReq, out.data());
  uint8_t* m = out.data() + kMadHeaderSize;
  putb(m, 0, 4, r.local_comm_id);
  putb(m, 8, 8, r.service_id);
  putb(m, 16, 8, r.local_ca_guid);
  putb(m, 28, 4, r.local_qkey);
  putb(m, 32, 3, r.local_qpn);
  putb(m, 35, 1, r.responder_resources);
  putb(m, 36, 3, r.local_eecn);
  putb(m, 39, 1, r.initiator_depth);
  put(m, 43, 0, 5, r.remote_cm_response_timeout);
  put(m, 43, 5, 2, r.transport_type);
  put(m, 43, 7, 1, r.end_to_end_flow_control);
  putb(m, 44, 3, r.starting_psn);
  put(m, 47, 0, 5, r.local_cm_response_timeout);
  put(m, 47, 5, 3, r.retry_count);
  putb(m, 48, 2, r.pkey);
  put(m, 50, 0, 4, r.path_mtu);
  put(m, 50, 4, 1, r.rdc_exists);
  put(m, 50, 5, 3, r.rnr_retry_count);
  put(m, 51, 0, 4, r.max_cm_retries);
  put(m, 51, 4, 1, r.srq);
  put(m, 51, 5, 3, r.extended_transport_type);
  putb(m, 52, 2, r.primary_local_lid);
  putb(m, 54, 2, r.primary_remote_lid);
  put_bytes(m, 56, r.primary_local_gid);
  put_bytes(m, 72, r.primary_remote_gid);
  put(m, 88, 0, 20, r.primary_flow_label);
  put(m, 91, 2, 6, r.primary_packet_rate);
  putb(m, 92, 1, r.primary_traffic_class);
  putb(m, 93, 1, r.primary_hop_limit);
  put(m, 94, 0, 4, r.primary_sl);
  put(m, 94, 4, 1, r.primary_subnet_local);
  put(m, 95, 0, 5, r.primary_local_ack_timeout);
  put_bytes(m, 140, r.private_data);
}

bool decode(ConstMad in, Req* r) {
  const uint8_t* m = body(in, Attr::kReq);
  if (!m) return false;
  r->local_comm_id = uint32_t(getb(m, 0, 4));
  r->service_id = getb(m, 8, 8);
  r->local_ca_guid = getb(m, 16, 8);
  r->local_qkey = uint32_t(getb(m, 28, 4));
  r->local_qpn = uint32_t(getb(m, 32, 3));
  r->responder_resources = uint8_t(getb(m, 35, 1));
  r->local_eecn = uint32_t(getb(m, 36, 3));
  r->initiator_depth = uint8_t(getb(m, 39, 1));
  r->remote_cm_response_timeout = uint8_t(get(m, 43, 0, 5));
  r->transport_type = uint8_t(get(m, 43, 5, 2));
  r->end_to_end_flow_control = get(m, 43, 7, 1);
  r->starting_psn = uint32_t(getb(m, 44, 3));
  r->local_cm_response_timeout = uint8_t(get(m, 47, 0, 5));
  r->retry_count = uint8_t(get(m, 47, 5, 3));
  r->pkey = uint16_t(getb(m, 48, 2));
  r->path_mtu = uint8_t(get(m, 50, 0, 4));
  r->rdc_exists = get(m, 50, 4, 1);
  r->rnr_retry_count = uint8_t(get(m, 50, 5, 3));
  r->max_cm_retries = uint8_t(get(m, 51, 0, 4));
  r->srq = get(m, 51, 4, 1);
  r->extended_transport_type = uint8_t(get(m, 51, 5, 3));
  r->primary_local_lid = uint16_t(getb(m, 52, 2));
  r->primary_remote_lid = uint16_t(getb(m, 54, 2));
  get_bytes(m, 56, r->primary_local_gid);
  get_bytes(m, 72, r->primary_remote_gid);
  r->primary_flow_label = uint32_t(get(m, 88, 0, 20));
  r->primary_packet_rate = uint8_t(get(m, 91, 2, 6));
  r->primary_traffic_class = uint8_t(getb(m, 92, 1));
  r->primary_hop_limit = uint8_t(getb(m, 93, 1));
  r->primary_sl = uint8_t(get(m, 94, 0, 4));
  r->primary_subnet_local = get(m, 94, 4, 1);
  r->primary_local_ack_timeout = uint8_t(get(m, 95, 0, 5));
  get_bytes(m, 140, r->private_data);
  return true;
}

// REP (Table 107).
void encode(const MadHeader& h, const Rep& r, Mad out) {
  encode_header(h, Attr::kRep, out.data());
  uint8_t* m = out.data() + kMadHeaderSize;
  putb(m, 0, 4, r.local_comm_id);
  putb(m, 4, 4, r.remote_comm_id);
  putb(m, 8, 4, r.local_qkey);
  putb(m, 12, 3, r.local_qpn);
  putb(m, 16, 3, r.local_eecn);
  putb(m, 20, 3, r.starting_psn);
  putb(m, 24, 1, r.responder_resources);
  putb(m, 25, 1, r.initiator_depth);
  put(m, 26, 0, 5, r.target_ack_delay);
  put(m, 26, 5, 2, r.failover_accepted);
  put(m, 26, 7, 1, r.end_to_end_flow_control);
  put(m, 27, 0, 3, r.rnr_retry_count);
  put(m, 27, 3, 1, r.srq);
  putb(m, 28, 8, r.local_ca_guid);
  put_bytes(m, 36, r.private_data);
}

bool decode(ConstMad in, Rep* r) {
  const uint8_t* m = body(in, Attr::kRep);
  if (!m) return false;
  r->local_comm_id = uint32_t(getb(m, 0, 4));
  r->remote_comm_id = uint32_t(getb(m, 4, 4));
  r->local_qkey = uint32_t(getb(m, 8, 4));
  r->local_qpn = uint32_t(getb(m, 12, 3));
  r->local_eecn = uint32_t(getb(m, 16, 3));
  r->starting_psn = uint32_t(getb(m, 20, 3));
  r->responder_resources = uint8_t(getb(m, 24, 1));
  r->initiator_depth = uint8_t(getb(m, 25, 1));
  r->target_ack_delay = uint8_t(get(m, 26, 0, 5));
  r->failover_accepted = uint8_t(get(m, 26, 5, 2));
  r->end_to_end_flow_control = get(m, 26, 7, 1);
  r->rnr_retry_count = uint8_t(get(m, 27, 0, 3));
  r->srq = get(m, 27, 3, 1);
  r->local_ca_guid = getb(m, 28, 8);
  get_bytes(m, 36, r->private_data);
  return true;
}

// REJ (Table 105).
void encode(const MadHeader& h, const Rej& r, Mad out) {
  encode_header(h, Attr::kRej, out.data());
  uint8_t* m = out.data() + kMadHeaderSize;
  putb(m, 0, 4, r.local_comm_id);
  putb(m, 4, 4, r.remote_comm_id);
  put(m, 8, 0, 2, r.message_rejected);
  put(m, 9, 0, 7, r.reject_info_length);
  putb(m, 10, 2, r.reason);
  put_bytes(m, 12, r.ari);
  put_bytes(m, 84, r.private_data);
}

bool decode(ConstMad in, Rej* r) {
  const uint8_t* m = body(in, Attr::kRej);
  if (!m) return false;
  r->local_comm_id = uint32_t(getb(m, 0, 4));
  r->remote_comm_id = uint32_t(getb(m, 4, 4));
  r->message_rejected = uint8_t(get(m, 8, 0, 2));
  r->reject_info_length = uint8_t(get(m, 9, 0, 7));
  r->reason = uint16_t(getb(m, 10, 2));
  get_bytes(m, 12, r->ari);
  get_bytes(m, 84, r->private_data);
  return true;
}

// MRA (Table 104).
void encode(const MadHeader& h, const Mra& r, Mad out) {
  encode_header(h, Attr::kMra, out.data());
  uint8_t* m = out.data() + kMadHeaderSize;
  putb(m, 0, 4, r.local_comm_id);
  putb(m, 4, 4, r.remote_comm_id);
  put(m, 8, 0, 2, r.message_mraed);
  put(m, 9, 0, 5, r.service_timeout);
  put_bytes(m, 10, r.private_data);
}

bool decode(ConstMad in, Mra* r) {
  const uint8_t* m = body(in, Attr::kMra);
  if (!m) return false;
  r->local_comm_id = uint32_t(getb(m, 0, 4));
  r->remote_comm_id = uint32_t(getb(m, 4, 4));
  r->message_mraed = uint8_t(get(m, 8, 0, 2));
  r->service_timeout = uint8_t(get(m, 9, 0, 5));
  get_bytes(m, 10, r->private_data);
  return true;
}

// RTU, DREP (Tables 108, 110): comm IDs, private data.
void encode(const MadHeader& h, const Rtu& r, Mad out) {
  encode_header(h, Attr::kRtu, out.data());
  uint8_t* m = out.data() + kMadHeaderSize;
  putb(m, 0, 4, r.local_comm_id);
  putb(m, 4, 4, r.remote_comm_id);
  put_bytes(m, 8, r.private_data);
}

bool decode(ConstMad in, Rtu* r) {
  const uint8_t* m = body(in, Attr::kRtu);
  if (!m) return false;
  r->local_comm_id = uint32_t(getb(m, 0, 4));
  r->remote_comm_id = uint32_t(getb(m, 4, 4));
  get_bytes(m, 8, r->private_data);
  return true;
}

void encode(const MadHeader& h, const Drep& r, Mad out) {
  encode_header(h, Attr::kDrep, out.data());
  uint8_t* m = out.data() + kMadHeaderSize;
  putb(m, 0, 4, r.local_comm_id);
  putb(m, 4, 4, r.remote_comm_id);
  put_bytes(m, 8, r.private_data);
}

bool decode(ConstMad in, Drep* r) {
  const uint8_t* m = body(in, Attr::kDrep);
  if (!m) return false;
  r->local_comm_id = uint32_t(getb(m, 0, 4));
  r->remote_comm_id = uint32_t(getb(m, 4, 4));
  get_bytes(m, 8, r->private_data);
  return true;
}

// DREQ (Table 109).
void encode(const MadHeader& h, const Dreq& r, Mad out) {
  encode_header(h, Attr::kDreq, out.data());
  uint8_t* m = out.data() + kMadHeaderSize;
  putb(m, 0, 4, r.local_comm_id);
  putb(m, 4, 4, r.remote_comm_id);
  putb(m, 8, 3, r.remote_qpn);
  put_bytes(m, 12, r.private_data);
}

bool decode(ConstMad in, Dreq* r) {
  const uint8_t* m = body(in, Attr::kDreq);
  if (!m) return false;
  r->local_comm_id = uint32_t(getb(m, 0, 4));
  r->remote_comm_id = uint32_t(getb(m, 4, 4));
  r->remote_qpn = uint32_t(getb(m, 8, 3));
  get_bytes(m, 12, r->private_data);
  return true;
}

// SIDR REQ and REP (Tables 116, 117).
void encode(const MadHeader& h, const SidrReq& r, Mad out) {
  encode_header(h, Attr::kSidrReq, out.data());
  uint8_t* m = out.data() + kMadHeaderSize;
  putb(m, 0, 4, r.request_id);
  putb(m, 4, 2, r.pkey);
  putb(m, 8, 8, r.service_id);
  put_bytes(m, 16, r.private_data);
}

bool decode(ConstMad in, SidrReq* r) {
  const uint8_t* m = body(in, Attr::kSidrReq);
  if (!m) return false;
  r->request_id = uint32_t(getb(m, 0, 4));
  r->pkey = uint16_t(getb(m, 4, 2));
  r->service_id = getb(m, 8, 8);
  get_bytes(m, 16, r->private_data);
  return true;
}

void encode(const MadHeader& h, const SidrRep& r, Mad out) {
  encode_header(h, Attr::kSidrRep, out.data());
  uint8_t* m = out.data() + kMadHeaderSize;
  putb(m, 0, 4, r.request_id);
  putb(m, 4, 1, r.status);
  putb(m, 5, 1, r.additional_info_length);
  putb(m, 8, 3, r.qpn);
  putb(m, 12, 8, r.service_id);
  putb(m, 20, 4, r.qkey);
  put_bytes(m, 24, r.class_port_info);
  put_bytes(m, 96, r.private_data);
}

bool decode(ConstMad in, SidrRep* r) {
  const uint8_t* m = body(in, Attr::kSidrRep);
  if (!m) return false;
  r->request_id = uint32_t(getb(m, 0, 4));
  r->status = uint8_t(getb(m, 4, 1));
  r->additional_info_length = uint8_t(getb(m, 5, 1));
  r->qpn = uint32_t(getb(m, 8, 3));
  r->service_id = getb(m, 12, 8);
  r->qkey = uint32_t(getb(m, 20, 4));
  get_bytes(m, 24, r->class_port_info);
  get_bytes(m, 96, r->private_data);
  return true;
}

void encode(const CmaHeader& h, std::span<uint8_t, CmaHeader::kSize> out) {
  uint8_t* p = out.data();
  memset(p, 0, CmaHeader::kSize);
  p[0] = h.cma_version;
  p[1] = uint8_t(h.ip_version << 4);
  putb(p, 2, 2, h.port);
  memcpy(p + 4, h.src, 16);
  memcpy(p + 20, h.dst, 16);
}

bool decode(std::span<const uint8_t> in, CmaHeader* h) {
  if (in.size() < CmaHeader::kSize) return false;
  const uint8_t* p = in.data();
  h->cma_version = p[0];
  h->ip_version = p[1] >> 4;
  h->port = uint16_t(getb(p, 2, 2));
  memcpy(h->src, p + 4, 16);
  memcpy(h->dst, p + 20, 16);
  return h->cma_version == 0 && (h->ip_version == 4 || h->ip_version == 6);
}

}  // namespace uroce::wire::cm
