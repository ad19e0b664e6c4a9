// What the raw Ethernet conformance tests share (raw_test.cc,
// raw_pacing_test.cc): frames, flow rules as a program lays them out, a
// RAW_PACKET QP in RTS, and the fixture that skips without CAP_NET_RAW.
#pragma once

#include <arpa/inet.h>
#include <linux/capability.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fault/errors/fault_harness.h"

namespace uroce::fault::raw {

inline constexpr uint8_t kSrvMac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
inline constexpr uint8_t kCliMac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02};

inline bool has_net_raw() {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2]{};
  if (syscall(SYS_capget, &h, d) != 0) return false;
  return d[0].effective & (1u << CAP_NET_RAW);
}

/// Clears CAP_NET_RAW from this process's effective set.
inline bool drop_net_raw() {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2]{};
  if (syscall(SYS_capget, &h, d) != 0) return false;
  d[0].effective &= ~(1u << CAP_NET_RAW);
  return syscall(SYS_capset, &h, d) == 0;
}

/// An IPv4/UDP frame of `len` bytes from `src` to `dst` (MACs), ports given.
inline std::vector<uint8_t> udp_frame(const uint8_t* dst, const uint8_t* src, uint16_t sport, uint16_t dport,
                                      size_t len, uint32_t src_ip = 0x0a000002,
                                      uint32_t dst_ip = 0x0a000001) {
  std::vector<uint8_t> f(len, 0);
  memcpy(f.data(), dst, 6);
  memcpy(f.data() + 6, src, 6);
  f[12] = 0x08;
  f[13] = 0x00;
  uint8_t* ip = f.data() + 14;
  ip[0] = 0x45;
  const uint16_t tot = htons(uint16_t(len - 14));
  memcpy(ip + 2, &tot, 2);
  ip[8] = 64;
  ip[9] = 17;
  const uint32_t s = htonl(src_ip), d = htonl(dst_ip);
  memcpy(ip + 12, &s, 4);
  memcpy(ip + 16, &d, 4);
  uint8_t* udp = ip + 20;
  const uint16_t sp = htons(sport), dp = htons(dport), ul = htons(uint16_t(len - 34));
  memcpy(udp, &sp, 2);
  memcpy(udp + 2, &dp, 2);
  memcpy(udp + 4, &ul, 2);
  for (size_t i = 42; i < len; ++i) f[i] = uint8_t(i * 7);
  return f;
}

/// Counter `name` of QP `qpn` as `uroce stat -j --qp` prints it (the tool
/// from UROCE_TOOL, set by CTest); -1 if absent.
inline long long qp_counter(uint32_t qpn, const char* name) {
  const char* tool = getenv("UROCE_TOOL");
  if (!tool) return -1;
  std::string out;
  FILE* f = popen((std::string(tool) + " stat -j --qp " + std::to_string(qpn) + " 2>&1").c_str(), "r");
  if (!f) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  pclose(f);
  const std::string key = std::string("\"") + name + "\":";
  const size_t at = out.find(key);
  return at == std::string::npos ? -1 : std::stoll(out.substr(at + key.size()));
}

/// A flow attribute with its specs, as a program lays it out.
struct Rule {
  std::vector<uint8_t> bytes;
  explicit Rule(ibv_flow_attr_type type = IBV_FLOW_ATTR_NORMAL, uint16_t priority = 0, uint32_t flags = 0) {
    ibv_flow_attr a{};
    a.type = type;
    a.priority = priority;
    a.flags = flags;
    a.port = 1;
    a.size = sizeof(a);
    bytes.assign(reinterpret_cast<uint8_t*>(&a), reinterpret_cast<uint8_t*>(&a) + sizeof(a));
  }
  ibv_flow_attr* attr() { return reinterpret_cast<ibv_flow_attr*>(bytes.data()); }
  template <typename S>
  Rule& add(const S& s) {
    const auto* p = reinterpret_cast<const uint8_t*>(&s);
    bytes.insert(bytes.end(), p, p + sizeof(s));
    attr()->num_of_specs++;
    attr()->size = uint16_t(bytes.size());
    return *this;
  }
  Rule& dst_mac(const uint8_t* mac) {
    ibv_flow_spec_eth e{};
    e.type = IBV_FLOW_SPEC_ETH;
    e.size = sizeof(e);
    memcpy(e.val.dst_mac, mac, 6);
    memset(e.mask.dst_mac, 0xff, 6);
    return add(e);
  }
  Rule& udp_dport(uint16_t port) {
    ibv_flow_spec_tcp_udp u{};
    u.type = IBV_FLOW_SPEC_UDP;
    u.size = sizeof(u);
    u.val.dst_port = htons(port);
    u.mask.dst_port = 0xffff;
    return add(u);
  }
};

/// A RAW_PACKET QP in RTS with its CQ and a buffer.
struct RawQp {
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(160 * 1024);
  ~RawQp() {
    if (qp) ibv_destroy_qp(qp);
    if (mr) ibv_dereg_mr(mr);
    if (cq) ibv_destroy_cq(cq);
  }
  /// `rate_kbps`: packet pacing, set with the move to RTS (IBV_QP_RATE_LIMIT).
  ::testing::AssertionResult make(ibv_context* ctx, ibv_pd* pd, uint32_t rate_kbps = 0) {
    cq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
    if (!cq || !mr) return ::testing::AssertionFailure() << "cq/mr: " << strerror(errno);
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = cq;
    a.qp_type = IBV_QPT_RAW_PACKET;
    a.cap = {16, 16, 1, 1, 0};
    qp = ibv_create_qp(pd, &a);
    if (!qp) return ::testing::AssertionFailure() << "create raw QP: " << strerror(errno);
    // ibv_modify_qp(3): INIT = STATE, PORT; RTR = STATE; RTS = STATE.
    ibv_qp_attr m{};
    m.qp_state = IBV_QPS_INIT;
    m.port_num = 1;
    if (int e = ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PORT))
      return ::testing::AssertionFailure() << "INIT " << e;
    m.qp_state = IBV_QPS_RTR;
    if (int e = ibv_modify_qp(qp, &m, IBV_QP_STATE)) return ::testing::AssertionFailure() << "RTR " << e;
    m.qp_state = IBV_QPS_RTS;
    m.rate_limit = rate_kbps;
    if (int e = ibv_modify_qp(qp, &m, IBV_QP_STATE | (rate_kbps ? IBV_QP_RATE_LIMIT : 0)))
      return ::testing::AssertionFailure() << "RTS " << e;
    return ::testing::AssertionSuccess();
  }
  int recv(uint64_t wr_id, size_t off = 0, uint32_t len = 2048) {
    ibv_sge s{reinterpret_cast<uint64_t>(buf.data() + off), len, mr->lkey};
    return post_recv(qp, wr_id, &s, 1);
  }
  int send(uint64_t wr_id, const std::vector<uint8_t>& frame, size_t off = 32 * 1024) {
    memcpy(buf.data() + off, frame.data(), frame.size());
    ibv_sge s{reinterpret_cast<uint64_t>(buf.data() + off), uint32_t(frame.size()), mr->lkey};
    return post_send(qp, wr_id, IBV_WR_SEND, &s, 1);
  }
};

class RawEthernet : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    if (!has_net_raw()) GTEST_SKIP() << "needs CAP_NET_RAW (root)";
    pd_ = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
  }
  void TearDown() override {
    srv_.reset();
    cli_.reset();
    if (pd_) ibv_dealloc_pd(pd_);
  }
  /// The MTU of uroce_lo's interface (lo), from sysfs.
  static size_t ctx_mtu() {
    FILE* f = fopen("/sys/class/net/lo/mtu", "re");
    if (!f) return 0;
    unsigned long m = 0;
    if (fscanf(f, "%lu", &m) != 1) m = 0;
    fclose(f);
    return m;
  }
  ibv_pd* pd_ = nullptr;
  std::unique_ptr<RawQp> srv_ = std::make_unique<RawQp>(), cli_ = std::make_unique<RawQp>();
};

}  // namespace uroce::fault::raw
