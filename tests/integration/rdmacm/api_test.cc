// The drop-in librdmacm.so.1 without a peer: event channels behave like the
// kernel's rdma_cm fd, ids (asynchronous and synchronous), address and route
// resolution to uroce devices with the kernel's error codes, the QP and CQs
// rdma_create_qp makes, rdma_getaddrinfo and rdma_create_ep.
//
// Runs in a private network namespace (in_private_netns.sh): lo, and a veth
// interface d0 with 10.9.0.1/24 and fd09::1/64, so uroce has the devices
// uroce_lo and uroce_d0, and no route leads anywhere else.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>

namespace {

// What programs built against rdma-core v44 read (shared/research/rdmacm.md §1).
static_assert(sizeof(rdma_cm_id) == 416);
static_assert(offsetof(rdma_cm_id, channel) == 8 && offsetof(rdma_cm_id, qp) == 24);
static_assert(offsetof(rdma_cm_id, route) == 32 && offsetof(rdma_cm_id, ps) == 344);
static_assert(offsetof(rdma_cm_id, port_num) == 348 && offsetof(rdma_cm_id, event) == 352);
static_assert(offsetof(rdma_cm_id, send_cq) == 368 && offsetof(rdma_cm_id, recv_cq) == 384);
static_assert(offsetof(rdma_cm_id, srq) == 392 && offsetof(rdma_cm_id, pd) == 400);
static_assert(offsetof(rdma_cm_id, qp_type) == 408);
static_assert(sizeof(rdma_cm_event) == 80 && offsetof(rdma_cm_event, event) == 16);
static_assert(offsetof(rdma_cm_event, status) == 20 && offsetof(rdma_cm_event, param) == 24);

sockaddr_storage ip(const char* text, uint16_t port = 0) {
  sockaddr_storage s{};
  if (strchr(text, ':')) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&s);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    EXPECT_EQ(inet_pton(AF_INET6, text, &a->sin6_addr), 1) << text;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&s);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    EXPECT_EQ(inet_pton(AF_INET, text, &a->sin_addr), 1) << text;
  }
  return s;
}

sockaddr* sa(sockaddr_storage& s) { return reinterpret_cast<sockaddr*>(&s); }

std::string gid_text(const ibv_gid& g) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, g.raw, buf, sizeof(buf));
  return buf;
}

bool readable(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

class Cm : public ::testing::Test {
 protected:
  void SetUp() override {
    ch_ = rdma_create_event_channel();
    ASSERT_NE(ch_, nullptr) << strerror(errno);
  }
  void TearDown() override {
    if (ch_) rdma_destroy_event_channel(ch_);
  }
  /// The next event, which must be `type` for `id`, acknowledged.
  void expect_event(rdma_cm_id* id, rdma_cm_event_type type, int status = 0) {
    ASSERT_TRUE(readable(ch_->fd, 5000)) << "no event";
    rdma_cm_event* e = nullptr;
    ASSERT_EQ(rdma_get_cm_event(ch_, &e), 0) << strerror(errno);
    EXPECT_EQ(e->id, id);
    EXPECT_EQ(e->event, type) << rdma_event_str(e->event);
    EXPECT_EQ(e->status, status);
    rdma_ack_cm_event(e);
  }
  rdma_event_channel* ch_ = nullptr;
};

TEST_F(Cm, DevicesAreTheSharedContexts) {
  int n = 0;
  ibv_context** list = rdma_get_devices(&n);
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(n, 2);  // uroce_lo, uroce_d0
  EXPECT_EQ(list[2], nullptr);
  ibv_context** again = rdma_get_devices(nullptr);
  EXPECT_EQ(again[0], list[0]);
  EXPECT_EQ(again[1], list[1]);
  rdma_free_devices(again);
  rdma_free_devices(list);
}

TEST_F(Cm, ChannelBlocksPollsAndGivesEagainWhenNonBlocking) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, this, RDMA_PS_TCP), 0) << strerror(errno);
  EXPECT_EQ(id->context, this);
  EXPECT_EQ(id->channel, ch_);
  EXPECT_EQ(id->qp_type, IBV_QPT_RC);
  EXPECT_FALSE(readable(ch_->fd, 0));
  EXPECT_TRUE(fcntl(ch_->fd, F_GETFD) & FD_CLOEXEC);

  // Non-blocking: EAGAIN while nothing is queued.
  const int fl = fcntl(ch_->fd, F_GETFL);
  ASSERT_EQ(fcntl(ch_->fd, F_SETFL, fl | O_NONBLOCK), 0);
  rdma_cm_event* e = nullptr;
  EXPECT_EQ(rdma_get_cm_event(ch_, &e), -1);
  EXPECT_EQ(errno, EAGAIN);
  ASSERT_EQ(fcntl(ch_->fd, F_SETFL, fl), 0);

  // Blocking: waits until an event is posted from another thread.
  std::atomic<bool> got{false};
  std::thread reader([&] {
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(ch_, &ev) == 0) {
      got = ev->event == RDMA_CM_EVENT_ADDR_RESOLVED;
      rdma_ack_cm_event(ev);
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(got.load());
  auto dst = ip("127.0.0.1", 7471);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, sa(dst), 1000), 0) << strerror(errno);
  reader.join();
  EXPECT_TRUE(got.load());
  EXPECT_FALSE(readable(ch_->fd, 0)) << "readable with nothing queued";

  // Readable while an event is queued, and not after it was taken.
  ASSERT_EQ(rdma_resolve_route(id, 1000), 0) << strerror(errno);
  EXPECT_TRUE(readable(ch_->fd, 0));
  expect_event(id, RDMA_CM_EVENT_ROUTE_RESOLVED);
  EXPECT_FALSE(readable(ch_->fd, 0));
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

TEST_F(Cm, LoopbackResolvesToUroceLoOnBothFamilies) {
  for (const char* dst_text : {"127.0.0.1", "::1"}) {
    SCOPED_TRACE(dst_text);
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
    auto dst = ip(dst_text, 7174);
    ASSERT_EQ(rdma_resolve_addr(id, nullptr, sa(dst), 1000), 0) << strerror(errno);
    expect_event(id, RDMA_CM_EVENT_ADDR_RESOLVED);
    ASSERT_NE(id->verbs, nullptr);
    EXPECT_STREQ(ibv_get_device_name(id->verbs->device), "uroce_lo");
    EXPECT_EQ(id->port_num, 1);
    const std::string want = strchr(dst_text, ':') ? "::1" : "::ffff:127.0.0.1";
    EXPECT_EQ(gid_text(id->route.addr.addr.ibaddr.sgid), want);
    EXPECT_EQ(gid_text(id->route.addr.addr.ibaddr.dgid), want);
    EXPECT_EQ(ntohs(rdma_get_dst_port(id)), 7174);
    EXPECT_NE(rdma_get_src_port(id), 0);  // an ephemeral port was bound
    ASSERT_EQ(rdma_resolve_route(id, 1000), 0);
    expect_event(id, RDMA_CM_EVENT_ROUTE_RESOLVED);
    EXPECT_EQ(id->route.num_paths, 1);
    ASSERT_NE(id->route.path_rec, nullptr);
    EXPECT_EQ(gid_text(id->route.path_rec->sgid), want);
    EXPECT_EQ(rdma_destroy_id(id), 0);
  }
}

TEST_F(Cm, AnAddressOfThisHostResolvesToItsDevice) {
  for (const char* dst_text : {"10.9.0.1", "10.9.0.2", "fd09::1"}) {
    SCOPED_TRACE(dst_text);
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
    auto dst = ip(dst_text, 1);
    ASSERT_EQ(rdma_resolve_addr(id, nullptr, sa(dst), 1000), 0) << strerror(errno);
    expect_event(id, RDMA_CM_EVENT_ADDR_RESOLVED);
    ASSERT_NE(id->verbs, nullptr);
    EXPECT_STREQ(ibv_get_device_name(id->verbs->device), "uroce_d0");
    EXPECT_EQ(gid_text(id->route.addr.addr.ibaddr.sgid),
              strchr(dst_text, ':') ? "fd09::1" : "::ffff:10.9.0.1");
    EXPECT_EQ(rdma_destroy_id(id), 0);
  }
}

TEST_F(Cm, AddressErrorsAreTheKernels) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  // Not an address of this host.
  auto foreign = ip("10.9.0.7");
  EXPECT_EQ(rdma_bind_addr(id, sa(foreign)), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL);
  // No route: the call succeeds, the event says why.
  auto far = ip("192.0.2.9", 1);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, sa(far), 1000), 0) << strerror(errno);
  expect_event(id, RDMA_CM_EVENT_ADDR_ERROR, -ENETUNREACH);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  // Unknown port space.
  EXPECT_EQ(rdma_create_id(ch_, &id, nullptr, static_cast<rdma_port_space>(0x55)), -1);
  EXPECT_EQ(errno, EINVAL);
  // Route before address.
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  EXPECT_EQ(rdma_resolve_route(id, 1000), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

TEST_F(Cm, BindToAnAddressAttachesItsDevice) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_UDP), 0);
  EXPECT_EQ(id->qp_type, IBV_QPT_UD);
  auto a = ip("10.9.0.1", 4000);
  ASSERT_EQ(rdma_bind_addr(id, sa(a)), 0) << strerror(errno);
  ASSERT_NE(id->verbs, nullptr);
  EXPECT_STREQ(ibv_get_device_name(id->verbs->device), "uroce_d0");
  EXPECT_EQ(ntohs(rdma_get_src_port(id)), 4000);
  EXPECT_EQ(rdma_bind_addr(id, sa(a)), -1);  // bound already
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  // A wildcard bind attaches no device.
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  auto any = ip("0.0.0.0", 0);
  ASSERT_EQ(rdma_bind_addr(id, sa(any)), 0);
  EXPECT_EQ(id->verbs, nullptr);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

TEST_F(Cm, DestroyIdWaitsUntilItsEventsAreAcknowledged) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  auto dst = ip("127.0.0.1", 1);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, sa(dst), 1000), 0);
  rdma_cm_event* e = nullptr;
  ASSERT_EQ(rdma_get_cm_event(ch_, &e), 0);
  std::atomic<bool> destroyed{false};
  std::thread t([&] {
    rdma_destroy_id(id);
    destroyed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(destroyed.load()) << "rdma_destroy_id returned with an event not acknowledged";
  rdma_ack_cm_event(e);
  t.join();
  EXPECT_TRUE(destroyed.load());
}

TEST_F(Cm, EventsOfADestroyedIdAreDropped) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  auto dst = ip("127.0.0.1", 1);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, sa(dst), 1000), 0);
  EXPECT_EQ(rdma_destroy_id(id), 0);  // its ADDR_RESOLVED was never read
  ASSERT_EQ(fcntl(ch_->fd, F_SETFL, fcntl(ch_->fd, F_GETFL) | O_NONBLOCK), 0);
  rdma_cm_event* e = nullptr;
  EXPECT_EQ(rdma_get_cm_event(ch_, &e), -1);
  EXPECT_EQ(errno, EAGAIN);
}

TEST_F(Cm, MigrateMovesQueuedEventsToTheNewChannel) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
  auto dst = ip("127.0.0.1", 1);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, sa(dst), 1000), 0);
  rdma_event_channel* other = rdma_create_event_channel();
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(rdma_migrate_id(id, other), 0) << strerror(errno);
  EXPECT_EQ(id->channel, other);
  EXPECT_TRUE(readable(other->fd, 0));
  rdma_cm_event* e = nullptr;
  ASSERT_EQ(rdma_get_cm_event(other, &e), 0);
  EXPECT_EQ(e->event, RDMA_CM_EVENT_ADDR_RESOLVED);
  rdma_ack_cm_event(e);
  ASSERT_EQ(fcntl(ch_->fd, F_SETFL, fcntl(ch_->fd, F_GETFL) | O_NONBLOCK), 0);
  EXPECT_EQ(rdma_get_cm_event(ch_, &e), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  rdma_destroy_event_channel(other);
}

TEST_F(Cm, SynchronousIdsWaitForTheirEvent) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP), 0);
  ASSERT_NE(id->channel, nullptr);
  auto dst = ip("127.0.0.1", 1);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, sa(dst), 1000), 0) << strerror(errno);
  ASSERT_NE(id->event, nullptr);
  EXPECT_EQ(id->event->event, RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_EQ(rdma_resolve_route(id, 1000), 0);
  EXPECT_EQ(id->event->event, RDMA_CM_EVENT_ROUTE_RESOLVED);
  EXPECT_EQ(rdma_destroy_id(id), 0);
  // The error comes back as the call's errno.
  ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP), 0);
  auto far = ip("192.0.2.9", 1);
  EXPECT_EQ(rdma_resolve_addr(id, nullptr, sa(far), 1000), -1);
  EXPECT_EQ(errno, ENETUNREACH);
  EXPECT_EQ(rdma_destroy_id(id), 0);
}

TEST_F(Cm, CreateQpMakesCqsAndLeavesTheQpInInit) {
  for (rdma_port_space ps : {RDMA_PS_TCP, RDMA_PS_UDP}) {
    SCOPED_TRACE(ps);
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(ch_, &id, nullptr, ps), 0);
    auto dst = ip("127.0.0.1", 1);
    ASSERT_EQ(rdma_resolve_addr(id, nullptr, sa(dst), 1000), 0);
    expect_event(id, RDMA_CM_EVENT_ADDR_RESOLVED);
    ibv_qp_init_attr attr{};
    attr.qp_type = id->qp_type;
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 16;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    ASSERT_EQ(rdma_create_qp(id, nullptr, &attr), 0) << strerror(errno);
    ASSERT_NE(id->qp, nullptr);
    EXPECT_NE(id->send_cq, nullptr);
    EXPECT_NE(id->recv_cq, nullptr);
    EXPECT_NE(id->send_cq_channel, nullptr);
    EXPECT_EQ(attr.send_cq, id->send_cq);
    EXPECT_EQ(id->qp->context, id->verbs);
    ibv_qp_attr qa{};
    ibv_qp_init_attr qi{};
    ASSERT_EQ(ibv_query_qp(id->qp, &qa, IBV_QP_STATE | IBV_QP_QKEY, &qi), 0);
    // UD QPs are ready at once (their peers are named per work request).
    EXPECT_EQ(qa.qp_state, ps == RDMA_PS_UDP ? IBV_QPS_RTS : IBV_QPS_INIT);
    if (ps == RDMA_PS_UDP) {
      EXPECT_EQ(qa.qkey, 0x01234567u);
    }
    ibv_qp_attr ia{};
    int mask = 0;
    ia.qp_state = IBV_QPS_INIT;
    ASSERT_EQ(rdma_init_qp_attr(id, &ia, &mask), 0);
    EXPECT_EQ(ia.port_num, 1);
    EXPECT_TRUE(mask & IBV_QP_STATE);
    rdma_destroy_qp(id);
    EXPECT_EQ(id->qp, nullptr);
    EXPECT_EQ(id->send_cq, nullptr);
    EXPECT_EQ(rdma_destroy_id(id), 0);
  }
}

TEST_F(Cm, GetaddrinfoAndCreateEp) {
  rdma_addrinfo hints{};
  rdma_addrinfo* res = nullptr;
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_port_space = RDMA_PS_TCP;
  ASSERT_EQ(rdma_getaddrinfo("10.9.0.1", "7471", &hints, &res), 0);
  ASSERT_NE(res->ai_src_addr, nullptr);
  EXPECT_EQ(res->ai_qp_type, IBV_QPT_RC);
  rdma_cm_id* listen_id = nullptr;
  ASSERT_EQ(rdma_create_ep(&listen_id, res, nullptr, nullptr), 0) << strerror(errno);
  EXPECT_STREQ(ibv_get_device_name(listen_id->verbs->device), "uroce_d0");
  EXPECT_EQ(ntohs(rdma_get_src_port(listen_id)), 7471);
  rdma_destroy_ep(listen_id);
  rdma_freeaddrinfo(res);

  hints.ai_flags = 0;
  ASSERT_EQ(rdma_getaddrinfo("127.0.0.1", "7471", &hints, &res), 0);
  ASSERT_NE(res->ai_dst_addr, nullptr);
  ibv_qp_init_attr attr{};
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  attr.qp_type = IBV_QPT_RC;
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_ep(&id, res, nullptr, &attr), 0) << strerror(errno);
  EXPECT_NE(id->qp, nullptr);
  EXPECT_EQ(id->route.num_paths, 1);
  rdma_destroy_ep(id);
  rdma_freeaddrinfo(res);
  EXPECT_NE(rdma_getaddrinfo("no-such-host.invalid", "1", &hints, &res), 0);

  // Addresses given in the hints alone (libfabric's verbs provider does so).
  auto dst = ip("127.0.0.1", 7471);
  rdma_addrinfo h2{};
  h2.ai_dst_addr = sa(dst);
  h2.ai_dst_len = sizeof(sockaddr_in);
  ASSERT_EQ(rdma_getaddrinfo(nullptr, nullptr, &h2, &res), 0);
  ASSERT_NE(res->ai_dst_addr, nullptr);
  EXPECT_EQ(memcmp(res->ai_dst_addr, &dst, sizeof(sockaddr_in)), 0);
  EXPECT_EQ(res->ai_family, AF_INET);
  rdma_freeaddrinfo(res);
}

}  // namespace
