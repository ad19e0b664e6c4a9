// AF_UNIX helpers: abstract-namespace addresses (scoped to the network
// namespace, so each "host" in a netns test gets its own), SEQPACKET
// request/reply with optional fd passing, DGRAM notifications.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <string>

namespace uroce {

/// Fills `addr` with an abstract address "\0<name>"; returns its length.
socklen_t make_abstract_addr(const std::string& name, sockaddr_un* addr);

/// Sends one message with up to one fd attached (fd < 0: none). Returns bytes or -errno.
ssize_t send_msg_fd(int sock, const void* buf, size_t len, int fd);
/// Receives one message and an optional attached fd (*fd = -1 if none).
/// `timeout_ms` < 0 waits forever, 0 does not wait (-ETIMEDOUT when nothing is
/// there; no poll() first). Returns bytes or -errno.
ssize_t recv_msg_fd(int sock, void* buf, size_t len, int* fd, int timeout_ms);

}  // namespace uroce
