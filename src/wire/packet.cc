#include "wire/packet.h"

#include <cstring>

namespace uroce::wire {
namespace {

void put16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v >> 8);
  p[1] = uint8_t(v);
}
void put24(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 16);
  p[1] = uint8_t(v >> 8);
  p[2] = uint8_t(v);
}
void put32(uint8_t* p, uint32_t v) {
  put16(p, uint16_t(v >> 16));
  put16(p + 2, uint16_t(v));
}
void put64(uint8_t* p, uint64_t v) {
  put32(p, uint32_t(v >> 32));
  put32(p + 4, uint32_t(v));
}
uint16_t get16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }
uint32_t get24(const uint8_t* p) { return uint32_t(p[0]) << 16 | uint32_t(p[1]) << 8 | p[2]; }
uint32_t get32(const uint8_t* p) { return uint32_t(get16(p)) << 16 | get16(p + 2); }
uint64_t get64(const uint8_t* p) { return uint64_t(get32(p)) << 32 | get32(p + 4); }

void put_bth(uint8_t* p, const Bth& b) {
  p[0] = b.opcode;
  p[1] = uint8_t((b.solicited ? 0x80 : 0) | (b.mig_req ? 0x40 : 0) | (b.pad & 3) << 4 | (b.tver & 0xf));
  put16(p + 2, b.pkey);
  p[4] = b.resv8a;
  put24(p + 5, b.dest_qp);
  p[8] = b.ack_req ? 0x80 : 0;  // A, then 7 reserved bits
  put24(p + 9, b.psn);
}

void get_bth(const uint8_t* p, Bth* b) {
  b->opcode = p[0];
  b->solicited = p[1] & 0x80;
  b->mig_req = p[1] & 0x40;
  b->pad = (p[1] >> 4) & 3;
  b->tver = p[1] & 0xf;
  b->pkey = get16(p + 2);
  b->resv8a = p[4];
  b->dest_qp = get24(p + 5);
  b->ack_req = p[8] & 0x80;
  b->psn = get24(p + 9);
}

/// Writes (or, with `in`, reads) one extended header at p.
void put_hdr(Hdr h, uint8_t* p, const Packet& k) {
  switch (h) {
    case kDeth:
      put32(p, k.qkey);
      p[4] = 0;
      put24(p + 5, k.src_qp);
      break;
    case kXrcEth:
      p[0] = 0;
      put24(p + 1, k.xrc_srqn);
      break;
    case kReth:
      put64(p, k.va);
      put32(p + 8, k.rkey);
      put32(p + 12, k.dma_len);
      break;
    case kAtomicEth:
      put64(p, k.va);
      put32(p + 8, k.rkey);
      put64(p + 12, k.swap_add);
      put64(p + 20, k.compare);
      break;
    case kAeth:
      p[0] = k.syndrome;
      put24(p + 1, k.msn);
      break;
    case kAtomicAckEth:
      put64(p, k.atomic_orig);
      break;
    case kImmDt:
      memcpy(p, &k.imm, 4);  // already in network order
      break;
    case kIeth:
      put32(p, k.inv_rkey);
      break;
  }
}

void get_hdr(Hdr h, const uint8_t* p, Packet* k) {
  switch (h) {
    case kDeth:
      k->qkey = get32(p);
      k->src_qp = get24(p + 5);
      break;
    case kXrcEth:
      k->xrc_srqn = get24(p + 1);
      break;
    case kReth:
      k->va = get64(p);
      k->rkey = get32(p + 8);
      k->dma_len = get32(p + 12);
      break;
    case kAtomicEth:
      k->va = get64(p);
      k->rkey = get32(p + 8);
      k->swap_add = get64(p + 12);
      k->compare = get64(p + 20);
      break;
    case kAeth:
      k->syndrome = p[0];
      k->msn = get24(p + 1);
      break;
    case kAtomicAckEth:
      k->atomic_orig = get64(p);
      break;
    case kImmDt:
      memcpy(&k->imm, p, 4);
      break;
    case kIeth:
      k->inv_rkey = get32(p);
      break;
  }
}

uint32_t pad_for(size_t payload) { return uint32_t((4 - (payload & 3)) & 3); }

}  // namespace

const char* to_string(DecodeError e) {
  switch (e) {
    case DecodeError::kNone:
      return "ok";
    case DecodeError::kTruncated:
      return "truncated";
    case DecodeError::kUnknownOpcode:
      return "unknown opcode";
    case DecodeError::kBadVersion:
      return "bad transport version";
    case DecodeError::kBadPadding:
      return "bad pad count";
    case DecodeError::kBadPayload:
      return "payload on an opcode without one";
    case DecodeError::kBadSyndrome:
      return "reserved AETH syndrome";
    case DecodeError::kCnp:
      return "CNP";
  }
  return "?";
}

size_t encoded_size(const Packet& p) {
  if (p.bth.opcode == kCnpOpcode) return kBthBytes + kCnpReservedBytes;
  const uint32_t h = header_bytes(p.bth.opcode);
  return h ? h + p.payload.size() + pad_for(p.payload.size()) : 0;
}

size_t encode(Packet& p, uint8_t* out, size_t cap) {
  const size_t n = encoded_size(p);
  if (n == 0 || n > cap) return 0;
  if (p.bth.opcode == kCnpOpcode) {
    p.bth.pad = 0;
    put_bth(out, p.bth);
    memset(out + kBthBytes, 0, kCnpReservedBytes);
    return n;
  }
  p.bth.pad = uint8_t(pad_for(p.payload.size()));
  put_bth(out, p.bth);
  uint8_t* at = out + kBthBytes;
  const uint16_t hdrs = headers_of(p.bth.opcode);
  for (Hdr h : kHdrOrder) {
    if (!(hdrs & h)) continue;
    put_hdr(h, at, p);
    at += hdr_bytes(h);
  }
  if (!p.payload.empty()) memcpy(at, p.payload.data(), p.payload.size());
  at += p.payload.size();
  memset(at, 0, p.bth.pad);
  return n;
}

DecodeError decode(std::span<const uint8_t> bytes, Packet* out) {
  if (bytes.size() < kBthBytes + kIcrcBytes) return DecodeError::kTruncated;
  *out = Packet{};
  get_bth(bytes.data(), &out->bth);
  if (out->bth.opcode == kCnpOpcode) return DecodeError::kCnp;
  if (out->bth.tver != 0) return DecodeError::kBadVersion;
  const OpInfo* info = op_info(out->bth.opcode);
  if (!info) return DecodeError::kUnknownOpcode;
  const uint32_t hlen = header_bytes(out->bth.opcode);
  if (bytes.size() < hlen + kIcrcBytes) return DecodeError::kTruncated;
  const uint8_t* at = bytes.data() + kBthBytes;
  const uint16_t hdrs = headers_of(out->bth.opcode);
  for (Hdr h : kHdrOrder) {
    if (!(hdrs & h)) continue;
    get_hdr(h, at, out);
    at += hdr_bytes(h);
  }
  if ((hdrs & kAeth) && !syndrome_valid(out->syndrome)) return DecodeError::kBadSyndrome;
  const size_t body = bytes.size() - hlen - kIcrcBytes;  // payload + pad
  if (body & 3) return DecodeError::kBadPadding;
  if (out->bth.pad > body) return DecodeError::kBadPadding;
  const size_t payload = body - out->bth.pad;
  if (info->payload == Payload::kNone && body != 0) return DecodeError::kBadPayload;
  if (info->payload == Payload::kEight && payload != 8) return DecodeError::kBadPayload;
  if (payload == 0 && out->bth.pad != 0) return DecodeError::kBadPadding;
  out->payload = bytes.subspan(hlen, payload);
  return DecodeError::kNone;
}

}  // namespace uroce::wire
