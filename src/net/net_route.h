// Which link a QP's messages take: shared memory to a QP of this host that
// this user's uroced serves, the network (RoCE v2) to anything else
// (docs/network-link.md, "When a QP uses the network link"). UROCE_LINK
// overrides the choice ("udp": the network even on one host, for wire
// tests; "shm": never the network).
#pragma once

#include <cstdint>
#include <vector>

#include "contract/control_client.h"
#include "contract/device_info.h"
#include "contract/types.h"
#include "link/ip_addr.h"
#include "net/wr.h"

namespace uroce::core {

/// The unicast IP address GID `gid` of device `d` stands for (IPv4-mapped
/// or IPv6; a link-local one on `d`'s interface); false for anything else
/// (zero, multicast, unspecified).
bool unicast_addr(const uint8_t* gid, const DeviceInfo& d, link::IpAddr* out);

/// Whether a UD QP of device `d` is on the network link (so it can join
/// multicast groups): not on the loopback device unless UROCE_LINK=udp.
bool ud_on_network(const DeviceInfo& d);

/// The addresses a UD QP of device `d` receives at: every unicast address
/// among its GIDs, IPv4 first (the first is the QP's own socket's;
/// multicast groups are joined on it).
std::vector<link::IpAddr> ud_addresses(const DeviceInfo& d);

/// Whether QP `qpn` of `type` on device `d`, connected through `av` to QP
/// `dest_qpn` (RC, UC, XRC), reaches its peer over the network (decided at
/// INIT -> RTR). A UD QP: ud_on_network. `ctl` tells whether this user's
/// uroced serves the peer when the address is this host's.
bool wants_network(const DeviceInfo& d, QpType type, const AddressVector& av, uint32_t qpn, uint32_t dest_qpn,
                   ControlClient* ctl);

/// UD: whether a datagram to `av` takes the network rather than the
/// intra-host link. `cache_ip`, `cache_remote`: the caller's memory of the
/// last destination looked at (the check of an address of this host's
/// costs a system call).
bool ud_dest_remote(const DeviceInfo& d, const AddressVector& av, link::IpAddr* cache_ip, bool* cache_remote);

/// The path MTU in bytes: the attribute's (IB enum), at most the interface's.
uint32_t path_mtu_bytes(uint32_t path_mtu_attr, uint32_t if_mtu);

}  // namespace uroce::core
