// A uroced that exits because it was idle may already have taken a new
// client's connection into its queue: the client's hello then finds the
// connection closed without an answer. The client starts a uroced of its
// own and goes on, as it does when none answers at all; before, its
// ibv_get_device_list failed (seen as UCX's "no usable transports" now and
// then: each ucx_perftest run starts while the previous run's uroced is
// deciding to leave).
//
// A stand-in daemon of the test's own plays the leaving uroced: it takes one
// connection, reads the hello and closes everything. A daemon name of its
// own, in its own executable.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "fault/errors/fault_harness.h"

namespace uroce::fault {
namespace {

TEST(DaemonRace, AClientWhoseDaemonLeavesUnansweredStartsAnother) {
  const std::string name = "fault-daemon-race-" + std::to_string(getpid());
  ASSERT_EQ(setenv("UROCE_DAEMON_NAME", name.c_str(), 1), 0);
  // The leaving daemon, on the name the library will connect to.
  const std::string path = "uroce/" + name;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  memcpy(a.sun_path + 1, path.data(), path.size());
  const socklen_t alen = socklen_t(offsetof(sockaddr_un, sun_path) + 1 + path.size());
  int l = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  ASSERT_GE(l, 0);
  ASSERT_EQ(bind(l, reinterpret_cast<sockaddr*>(&a), alen), 0) << strerror(errno);
  ASSERT_EQ(listen(l, 8), 0);
  bool took = false;
  std::thread leaving([&] {
    pollfd pf{l, POLLIN, 0};
    if (::poll(&pf, 1, kWaitMs) != 1) return;
    const int c = accept(l, nullptr, nullptr);
    close(l);  // the name goes first: a new connect finds nobody
    if (c < 0) return;
    char hello[512];
    pollfd pc{c, POLLIN, 0};
    took = ::poll(&pc, 1, kWaitMs) == 1 && recv(c, hello, sizeof(hello), 0) > 0;
    close(c);  // no answer
  });
  // Expect: the library finds its hello unanswered, starts a uroced and
  // lists the devices it serves.
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  leaving.join();
  EXPECT_TRUE(took) << "the stand-in never got the hello: nothing was tested";
  ASSERT_NE(list, nullptr) << strerror(errno);
  EXPECT_GE(n, 1);
  ibv_context* ctx = list && n ? ibv_open_device(list[0]) : nullptr;
  EXPECT_NE(ctx, nullptr);
  if (ctx) ibv_close_device(ctx);
  if (list) ibv_free_device_list(list);
}

}  // namespace
}  // namespace uroce::fault
