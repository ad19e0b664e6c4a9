// UD datagrams for another process of this host. Every UD QP of a host
// receives on an unconnected socket bound to <local IP>:4791 (RoCE v2 has
// one destination port), and Linux hands each unicast datagram to one of
// those sockets — the one bound last — whichever process owns the QP the
// packet names. The process that got it delivers it to the named QP as the
// intra-host link delivers a UD SEND (memory/target.h): it acts as
// that QP's NIC on the QP's shared receive queue and CQ, so the owner needs
// no system call and no daemon hop (docs/network-link.md, "How packets
// reach their QP").
#pragma once

#include <cstdint>

#include "link/udp_link.h"
#include "wire/grh.h"
#include "wire/packet.h"

namespace uroce::core {

/// The GRH a UD receive gets for a datagram that came from `from` to `to`:
/// the IPv4 header Linux wrote for it (TTL and TOS are not visible to a
/// socket and are left 0).
void ud_grh(const wire::Packet& p, const link::UdpAddr& from, const link::UdpAddr& to,
            uint8_t grh[wire::kGrhBytes]);

/// Why a datagram for a QP of another process was not delivered.
enum class UdForward { kDelivered, kNotUd, kNoSuchQp, kBadQkey, kDropped };

/// Delivers a UD SEND_ONLY(_WITH_IMMEDIATE) packet (its ICRC already checked)
/// to QP `p.bth.dest_qp` of this host, which is not one of this process's
/// network QPs. Without a receive WQE, with the wrong Q_Key or for a QP that
/// does not receive, the datagram is dropped, as at the QP's own socket.
UdForward forward_ud(const wire::Packet& p, const link::UdpAddr& from, const link::UdpAddr& to);

}  // namespace uroce::core
