// rsockets (rdma/rsocket.h) through the drop-in librdmacm.so.1, between two
// threads of one process over uroce_lo (127.0.0.1): what a socket program
// relies on — refused connects, non-blocking connect and receive, rpoll,
// MSG_PEEK and MSG_WAITALL, half close (SHUT_WR) and end of stream, gathered
// sends, and riomap/riowrite.
//
// Runs in a private network namespace (in_private_netns.sh).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

namespace {

sockaddr_in lo(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

const sockaddr* sa(const sockaddr_in& a) { return reinterpret_cast<const sockaddr*>(&a); }

int listener(uint16_t port, int iomap = 0) {
  int s = rsocket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) return -1;
  if (iomap) rsetsockopt(s, SOL_RDMA, RDMA_IOMAPSIZE, &iomap, sizeof iomap);
  sockaddr_in a = lo(port);
  if (rbind(s, sa(a), sizeof a) != 0 || rlisten(s, 4) != 0) {
    rclose(s);
    return -1;
  }
  return s;
}

int connected(uint16_t port, int iomap = 0) {
  int s = rsocket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) return -1;
  if (iomap) rsetsockopt(s, SOL_RDMA, RDMA_IOMAPSIZE, &iomap, sizeof iomap);
  sockaddr_in a = lo(port);
  if (rconnect(s, sa(a), sizeof a) != 0) {
    rclose(s);
    return -1;
  }
  return s;
}

/// Waits (bounded) until fd reports `events`; returns revents.
short await(int fd, short events, int ms = 10000) {
  pollfd p{fd, events, 0};
  return rpoll(&p, 1, ms) == 1 ? p.revents : 0;
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i++) v[i] = uint8_t(i * 131 + seed + (i >> 12));
  return v;
}

/// A connected pair: the listener's accepted socket and the client's.
struct Pair {
  int ls = -1, server = -1, client = -1;
  explicit Pair(uint16_t port, int iomap = 0) {
    ls = listener(port, iomap);
    std::thread t([&] { client = connected(port, iomap); });
    if (ls >= 0 && await(ls, POLLIN) & POLLIN) server = raccept(ls, nullptr, nullptr);
    t.join();
  }
  ~Pair() {
    if (client >= 0) rclose(client);
    if (server >= 0) rclose(server);
    if (ls >= 0) rclose(ls);
  }
  bool ok() const { return ls >= 0 && server >= 0 && client >= 0; }
};

TEST(Rsocket, OnlyStreamSocketsAreMade) {
  EXPECT_EQ(rsocket(AF_INET, SOCK_DGRAM, 0), -1);
  EXPECT_EQ(errno, ENOTSUP);
  EXPECT_EQ(rsocket(AF_UNIX, SOCK_STREAM, 0), -1);
  EXPECT_EQ(errno, ENOTSUP);
  EXPECT_EQ(rsend(12345, "x", 1, 0), -1);
  EXPECT_EQ(errno, EBADF);
}

TEST(Rsocket, ConnectWithNoListenerIsRefused) {
  int s = rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_in a = lo(7301);
  EXPECT_EQ(rconnect(s, sa(a), sizeof a), -1);
  EXPECT_EQ(errno, ECONNREFUSED);
  EXPECT_EQ(rclose(s), 0);
}

TEST(Rsocket, NonblockingConnectCompletesThroughRpoll) {
  int ls = listener(7302);
  ASSERT_GE(ls, 0);
  int c = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  ASSERT_GE(c, 0);
  sockaddr_in a = lo(7302);
  const int rc = rconnect(c, sa(a), sizeof a);
  if (rc != 0) EXPECT_EQ(errno, EINPROGRESS);
  ASSERT_TRUE(await(ls, POLLIN) & POLLIN);
  int s = raccept(ls, nullptr, nullptr);
  ASSERT_GE(s, 0);
  EXPECT_TRUE(await(c, POLLOUT) & POLLOUT);
  int err = -1;
  socklen_t len = sizeof err;
  EXPECT_EQ(rgetsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len), 0);
  EXPECT_EQ(err, 0);
  // Nothing to read yet: EAGAIN at once, and rpoll times out.
  char b;
  EXPECT_EQ(rrecv(c, &b, 1, 0), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(await(c, POLLIN, 50), 0);
  ASSERT_EQ(rsend(s, "z", 1, 0), 1);
  EXPECT_TRUE(await(c, POLLIN) & POLLIN);
  EXPECT_EQ(rrecv(c, &b, 1, 0), 1);
  EXPECT_EQ(b, 'z');
  rclose(c);
  rclose(s);
  rclose(ls);
}

TEST(Rsocket, BytesArriveInOrderThenEndOfStream) {
  Pair p(7303);
  ASSERT_TRUE(p.ok());
  const std::vector<uint8_t> out = pattern(3 << 20, 7);  // many times both rings
  std::thread sender([&] {
    size_t off = 0;
    while (off < out.size()) {
      const ssize_t n = rsend(p.client, out.data() + off, std::min<size_t>(out.size() - off, 100000), 0);
      if (n <= 0) break;
      off += size_t(n);
    }
    EXPECT_EQ(off, out.size());
    EXPECT_EQ(rshutdown(p.client, SHUT_WR), 0);
  });
  std::vector<uint8_t> in(out.size());
  ASSERT_EQ(rrecv(p.server, in.data(), in.size(), MSG_WAITALL), ssize_t(in.size()));
  sender.join();
  EXPECT_TRUE(in == out);
  char b;
  EXPECT_EQ(rrecv(p.server, &b, 1, 0), 0);  // the client shut its side down
  // The other direction still works after SHUT_WR.
  ASSERT_EQ(rsend(p.server, "ok", 2, 0), 2);
  char two[2];
  ASSERT_EQ(rrecv(p.client, two, 2, MSG_WAITALL), 2);
  EXPECT_EQ(memcmp(two, "ok", 2), 0);
  rclose(p.server);
  p.server = -1;
  EXPECT_EQ(rrecv(p.client, &b, 1, 0), 0);  // closed: end of stream
  EXPECT_TRUE(await(p.client, POLLIN) & POLLHUP);
}

TEST(Rsocket, PeekLeavesTheDataAndGatherSendsKeepOrder) {
  Pair p(7304);
  ASSERT_TRUE(p.ok());
  char a[] = "abc", b[] = "defgh";
  iovec v[2] = {{a, 3}, {b, 5}};
  ASSERT_EQ(rwritev(p.client, v, 2), 8);
  char got[8] = {};
  ASSERT_TRUE(await(p.server, POLLIN) & POLLIN);
  ASSERT_EQ(rrecv(p.server, got, 8, MSG_PEEK | MSG_WAITALL), 8);
  EXPECT_EQ(memcmp(got, "abcdefgh", 8), 0);
  char x[3], y[5];
  iovec w[2] = {{x, 3}, {y, 5}};
  ASSERT_EQ(rreadv(p.server, w, 2), 8);
  EXPECT_EQ(memcmp(x, "abc", 3), 0);
  EXPECT_EQ(memcmp(y, "defgh", 5), 0);
}

TEST(Rsocket, NamesAreTheConnectionsAddresses) {
  Pair p(7305);
  ASSERT_TRUE(p.ok());
  sockaddr_in peer{}, self{};
  socklen_t len = sizeof peer;
  ASSERT_EQ(rgetpeername(p.client, reinterpret_cast<sockaddr*>(&peer), &len), 0);
  EXPECT_EQ(ntohs(peer.sin_port), 7305);
  len = sizeof self;
  ASSERT_EQ(rgetsockname(p.server, reinterpret_cast<sockaddr*>(&self), &len), 0);
  EXPECT_EQ(ntohs(self.sin_port), 7305);
  EXPECT_EQ(self.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
}

TEST(Rsocket, RiowriteLandsInTheMappedBuffer) {
  Pair p(7306, 4);
  ASSERT_TRUE(p.ok());
  std::vector<uint8_t> target(65536, 0);
  ASSERT_EQ(riomap(p.server, target.data(), target.size(), PROT_WRITE, 0, 0), 0);
  // The mapping travels ahead of the next message.
  ASSERT_EQ(rsend(p.server, "m", 1, 0), 1);
  char b;
  ASSERT_EQ(rrecv(p.client, &b, 1, 0), 1);
  const std::vector<uint8_t> data = pattern(40000, 3);
  ASSERT_EQ(riowrite(p.client, data.data(), data.size(), 1000, 0), data.size());
  ASSERT_EQ(rsend(p.client, "d", 1, 0), 1);  // ordered after the writes
  ASSERT_EQ(rrecv(p.server, &b, 1, 0), 1);
  EXPECT_EQ(memcmp(target.data() + 1000, data.data(), data.size()), 0);
  EXPECT_EQ(target[999], 0);
  EXPECT_EQ(riounmap(p.server, target.data(), target.size()), 0);
}

// The peer's process ends without closing (as a crash would): its CM tells
// this side, whose receive then ends the stream (after the data that came)
// and whose send fails, as a TCP socket's would after a reset.
TEST(Rsocket, APeerProcessThatDiesEndsTheStream) {
  int ls = listener(7307);
  ASSERT_GE(ls, 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int c = connected(7307);
    if (c < 0 || rsend(c, "bye", 3, 0) != 3) _exit(1);
    usleep(100 * 1000);  // let it arrive
    _exit(0);            // no rclose: the process just ends
  }
  ASSERT_TRUE(await(ls, POLLIN) & POLLIN);
  int s = raccept(ls, nullptr, nullptr);
  ASSERT_GE(s, 0);
  char b[3];
  ASSERT_EQ(rrecv(s, b, 3, MSG_WAITALL), 3);
  EXPECT_EQ(memcmp(b, "bye", 3), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(await(s, POLLIN) & (POLLIN | POLLHUP));
  EXPECT_EQ(rrecv(s, b, 1, 0), 0);
  EXPECT_EQ(rsend(s, "x", 1, 0), -1);
  EXPECT_EQ(errno, ECONNRESET);
  rclose(s);
  rclose(ls);
}

}  // namespace
