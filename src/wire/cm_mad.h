// The IBTA Communication Manager's messages (IBTA Vol. 1, ch. 12), as MADs
// (ch. 13.4) in UD SENDs to QP1, and the RDMA CM's own header that leads a
// REQ's or SIDR REQ's private data: decoded into plain fields, encoded from
// them. Pure: no I/O, no allocation; decode never reads outside its input.
//
// A MAD is 256 bytes: a 24-byte common header, then 232 bytes of the
// message. Multi-byte fields are big-endian; fields narrower than a byte or
// than their bytes are packed from the most significant bit, as the IBTA
// tables draw them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace uroce::wire::cm {

constexpr size_t kMadSize = 256;
constexpr size_t kMadHeaderSize = 24;
constexpr uint32_t kGsiQpn = 1;
constexpr uint32_t kGsiQkey = 0x80010000;  // the well-known Q_Key of QP1
constexpr uint8_t kBaseVersion = 1;
constexpr uint8_t kClassCm = 0x07;
constexpr uint8_t kCmClassVersion = 2;
constexpr uint8_t kMethodSend = 0x03;  // every CM message (13.4.5)

/// Attribute IDs of the CM messages (12.6, Table 101).
enum class Attr : uint16_t {
  kReq = 0x0010,
  kMra = 0x0011,
  kRej = 0x0012,
  kRep = 0x0013,
  kRtu = 0x0014,
  kDreq = 0x0015,
  kDrep = 0x0016,
  kSidrReq = 0x0017,
  kSidrRep = 0x0018,
};

/// The common MAD header (13.4.2).
struct MadHeader {
  uint8_t base_version = kBaseVersion;
  uint8_t mgmt_class = kClassCm;
  uint8_t class_version = kCmClassVersion;
  uint8_t method = kMethodSend;
  uint16_t status = 0;
  uint16_t class_specific = 0;
  uint64_t tid = 0;
  uint16_t attr_id = 0;
  uint32_t attr_mod = 0;
};

// Private data sizes (Table 99 and the message tables).
constexpr size_t kReqPrivate = 92, kRepPrivate = 196, kRejPrivate = 148, kMraPrivate = 222;
constexpr size_t kRtuPrivate = 224, kDreqPrivate = 220, kDrepPrivate = 224;
constexpr size_t kSidrReqPrivate = 216, kSidrRepPrivate = 136;

/// REQ (12.6.5, Table 103); the primary path only (RoCE has no alternate).
struct Req {
  uint32_t local_comm_id = 0;
  uint64_t service_id = 0;
  uint64_t local_ca_guid = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;  // 24 bits
  uint8_t responder_resources = 0;
  uint32_t local_eecn = 0;  // 24 bits
  uint8_t initiator_depth = 0;
  uint8_t remote_cm_response_timeout = 0;  // 5 bits
  uint8_t transport_type = 0;              // 2 bits: 0 RC, 1 UC, 3 extended (XRC)
  bool end_to_end_flow_control = false;
  uint32_t starting_psn = 0;              // 24 bits
  uint8_t local_cm_response_timeout = 0;  // 5 bits
  uint8_t retry_count = 0;                // 3 bits
  uint16_t pkey = 0xffff;
  uint8_t path_mtu = 0;  // 4 bits, enum ibv_mtu
  bool rdc_exists = false;
  uint8_t rnr_retry_count = 0;  // 3 bits
  uint8_t max_cm_retries = 0;   // 4 bits
  bool srq = false;
  uint8_t extended_transport_type = 0;  // 3 bits
  uint16_t primary_local_lid = 0xffff;
  uint16_t primary_remote_lid = 0xffff;
  uint8_t primary_local_gid[16] = {};
  uint8_t primary_remote_gid[16] = {};
  uint32_t primary_flow_label = 0;  // 20 bits
  uint8_t primary_packet_rate = 0;  // 6 bits
  uint8_t primary_traffic_class = 0;
  uint8_t primary_hop_limit = 0;
  uint8_t primary_sl = 0;  // 4 bits
  bool primary_subnet_local = false;
  uint8_t primary_local_ack_timeout = 0;  // 5 bits
  uint8_t private_data[kReqPrivate] = {};
};

/// REP (12.6.8, Table 107).
struct Rep {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;     // 24 bits
  uint32_t local_eecn = 0;    // 24 bits
  uint32_t starting_psn = 0;  // 24 bits
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t target_ack_delay = 0;   // 5 bits
  uint8_t failover_accepted = 0;  // 2 bits
  bool end_to_end_flow_control = false;
  uint8_t rnr_retry_count = 0;  // 3 bits
  bool srq = false;
  uint64_t local_ca_guid = 0;
  uint8_t private_data[kRepPrivate] = {};
};

/// REJ's "message rejected" (12.6.7): what the REJ answers.
constexpr uint8_t kRejectedReq = 0, kRejectedRep = 1, kRejectedOther = 2;

/// REJ (12.6.7, Table 105).
struct Rej {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint8_t message_rejected = 0;    // 2 bits: 0 REQ, 1 REP, 2 other
  uint8_t reject_info_length = 0;  // 7 bits
  uint16_t reason = 0;
  uint8_t ari[72] = {};
  uint8_t private_data[kRejPrivate] = {};
};

/// MRA (12.6.6, Table 104).
struct Mra {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint8_t message_mraed = 0;    // 2 bits: 0 REQ, 1 REP, 2 LAP
  uint8_t service_timeout = 0;  // 5 bits
  uint8_t private_data[kMraPrivate] = {};
};

/// RTU (12.6.9), DREP (12.6.11): comm IDs and private data.
struct Rtu {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint8_t private_data[kRtuPrivate] = {};
};
struct Drep {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint8_t private_data[kDrepPrivate] = {};
};

/// DREQ (12.6.10).
struct Dreq {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t remote_qpn = 0;  // 24 bits
  uint8_t private_data[kDreqPrivate] = {};
};

/// SIDR REQ and SIDR REP (12.11).
struct SidrReq {
  uint32_t request_id = 0;
  uint16_t pkey = 0xffff;
  uint64_t service_id = 0;
  uint8_t private_data[kSidrReqPrivate] = {};
};
struct SidrRep {
  uint32_t request_id = 0;
  uint8_t status = 0;  // 0 valid, 1 service ID not supported, 2 rejected, ...
  uint8_t additional_info_length = 0;
  uint32_t qpn = 0;  // 24 bits
  uint64_t service_id = 0;
  uint32_t qkey = 0;
  uint8_t class_port_info[72] = {};
  uint8_t private_data[kSidrRepPrivate] = {};
};

/// The RDMA CM's header at the start of a REQ's or SIDR REQ's private data
/// (the Linux kernel's cma_hdr; IBTA Annex A11): version 0, the IP version
/// in the high nibble of the next byte, the active side's port, then the
/// source and destination addresses, IPv4 in the last four bytes of sixteen.
struct CmaHeader {
  static constexpr size_t kSize = 36;
  uint8_t cma_version = 0;
  uint8_t ip_version = 4;  // 4 or 6
  uint16_t port = 0;       // the connecting side's source port
  uint8_t src[16] = {};    // IPv6, or IPv4 in src[12..15]
  uint8_t dst[16] = {};
};

/// The ServiceID of an RDMA CM port: (port space << 16) | port (IBTA
/// Annex A11: 0x0000000001 prefix, then the IP protocol, then the port).
constexpr uint64_t service_id(uint16_t port_space, uint16_t port) {
  return uint64_t(port_space) << 16 | port;
}

// Each encode writes a whole MAD (header with the message's attribute ID,
// then the message, unused bytes zero); each decode checks the header (base
// version, class, class version, method, attribute) and reads the message.
using Mad = std::span<uint8_t, kMadSize>;
using ConstMad = std::span<const uint8_t>;

void encode(const MadHeader& h, const Req& m, Mad out);
void encode(const MadHeader& h, const Rep& m, Mad out);
void encode(const MadHeader& h, const Rej& m, Mad out);
void encode(const MadHeader& h, const Mra& m, Mad out);
void encode(const MadHeader& h, const Rtu& m, Mad out);
void encode(const MadHeader& h, const Dreq& m, Mad out);
void encode(const MadHeader& h, const Drep& m, Mad out);
void encode(const MadHeader& h, const SidrReq& m, Mad out);
void encode(const MadHeader& h, const SidrRep& m, Mad out);

/// Any MAD's common header (13.4.2), of class `h.mgmt_class`, naming
/// `attr`, followed by zeros (256 bytes at `mad`).
void encode_mad_header(const MadHeader& h, uint16_t attr, uint8_t* mad);
/// Any MAD's common header; false only if `in` is shorter than a MAD.
bool read_mad_header(ConstMad in, MadHeader* h);
/// The header of a CM MAD; false if `in` is not one (short, or another
/// version, class or method).
bool decode_header(ConstMad in, MadHeader* h);
bool decode(ConstMad in, Req* m);
bool decode(ConstMad in, Rep* m);
bool decode(ConstMad in, Rej* m);
bool decode(ConstMad in, Mra* m);
bool decode(ConstMad in, Rtu* m);
bool decode(ConstMad in, Dreq* m);
bool decode(ConstMad in, Drep* m);
bool decode(ConstMad in, SidrReq* m);
bool decode(ConstMad in, SidrRep* m);

void encode(const CmaHeader& h, std::span<uint8_t, CmaHeader::kSize> out);
/// False if the version is not 0 or the IP version neither 4 nor 6.
bool decode(std::span<const uint8_t> in, CmaHeader* h);

}  // namespace uroce::wire::cm
