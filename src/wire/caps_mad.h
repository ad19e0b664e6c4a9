// uroce's capability query between two connected QPs: which of uroce's
// extensions to IBTA's transport the peer's responder offers — today one,
// keeping request packets that arrive past a gap (selective repeat,
// docs/congestion.md). RC's wire has no place to say so, so the requester
// asks its peer QP directly: a UD SEND_ONLY addressed to the peer's RC QP
// number, carrying a vendor-specific MAD (IBTA Vol. 1 13.4: management
// class 0x09, vendor range 1) with the GSI's Q_Key. An RC QP of any other
// stack drops it unread: an opcode that does not match the QP's service
// fails header validation and is silently dropped (IBA 9.6.1.1; kernel rxe's
// check_type_state), so a peer that never answers is spoken to as IBTA says
// (go-back-N). A uroce peer answers with a GetResp MAD naming what it does,
// to the asking QP.
// Pure: no I/O; decode never reads outside its input.
#pragma once

#include <cstdint>
#include <span>

#include "wire/cm_mad.h"

namespace uroce::wire::caps {

constexpr uint8_t kClass = 0x09;  // vendor-specific, range 1 (no OUI)
constexpr uint8_t kClassVersion = 1;
constexpr uint8_t kMethodGet = 0x01;
constexpr uint8_t kMethodGetResp = 0x81;
constexpr uint16_t kAttrCaps = 0xff55;
/// Leads the data of both MADs: "uroceCAP".
constexpr uint64_t kMagic = 0x75726f6365434150ull;

/// What a responder offers (bits of Caps::flags).
constexpr uint32_t kKeepsOutOfOrder = 1u << 0;  // ResponderConfig::keep_ooo

struct Caps {
  bool reply = false;  // a GetResp (else a Get)
  uint64_t tid = 0;
  uint32_t flags = 0;  // a reply's
};

/// A 256-byte MAD: the query (reply false) or the answer to `tid`.
void encode(const Caps& c, std::span<uint8_t, cm::kMadSize> out);
/// False unless `in` is one of ours (class, version, method, attribute,
/// magic, status 0).
bool decode(std::span<const uint8_t> in, Caps* c);

}  // namespace uroce::wire::caps
