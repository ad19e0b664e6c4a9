// One side of the two-host multicast test (mcast_pair.sh): plain verbs on
// uroce's libibverbs.so.1, a UD QP on DEVICE (GID index 1, RoCE v2 IPv4).
//
//   mcast_peer recv DEVICE GROUP N READY_FILE [JOIN_ADDR]
//     attaches to GROUP (dotted IPv4, 224.0.0.0/4), posts N receives, creates
//     READY_FILE, and waits (bounded) for N datagrams: datagram i carries
//     pattern i, immediate i, QPN 0xFFFFFF, and a GRH whose destination is
//     GROUP. Exit 0 when all N arrived intact. With JOIN_ADDR (an IPv4
//     address of the device's interface), the program first joins GROUP at
//     the IP level on that interface with a UDP socket, as rdma_cm does for
//     its users on RoCE: kernel rxe's ibv_attach_mcast (Linux 6.1) only
//     filters the group's MAC, so without a join the kernel drops the
//     datagrams before rxe sees them (tests/interop/rxe_cases.sh).
//   mcast_peer send DEVICE GROUP N
//     sends datagrams 0..N-1 to GROUP (QPN 0xFFFFFF, Q_Key kQkey), 20 ms apart.
//
// Every wait is bounded (10 s); failures say what was wrong on stderr.
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr uint32_t kQkey = 0x1e1e1e1e;
constexpr uint32_t kGrh = 40;
constexpr uint32_t kMsg = 700;
constexpr int kWaitMs = 10000;

uint8_t pattern(uint32_t i, uint32_t pos) { return uint8_t(i * 131 + pos * 7 + (pos >> 8)); }

int fail(const char* what) {
  fprintf(stderr, "mcast_peer: %s (%s)\n", what, strerror(errno));
  return 1;
}

uint64_t now_ms() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000 + uint64_t(t.tv_nsec) / 1000000;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: mcast_peer recv|send DEVICE GROUP N [READY_FILE [JOIN_ADDR]]\n");
    return 2;
  }
  const bool recv_side = !strcmp(argv[1], "recv");
  const uint32_t n = uint32_t(atoi(argv[4]));
  in_addr group{};
  if (inet_pton(AF_INET, argv[3], &group) != 1 || n == 0 || n > 64 || (recv_side && argc < 6)) return 2;
  ibv_gid mgid{};
  mgid.raw[10] = mgid.raw[11] = 0xff;
  memcpy(mgid.raw + 12, &group, 4);

  int num = 0;
  ibv_device** list = ibv_get_device_list(&num);
  ibv_context* ctx = nullptr;
  for (int i = 0; list && i < num && !ctx; ++i)
    if (!strcmp(ibv_get_device_name(list[i]), argv[2])) ctx = ibv_open_device(list[i]);
  if (!ctx) return fail("device not found");
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = pd ? ibv_create_cq(ctx, 128, nullptr, nullptr, 0) : nullptr;
  std::vector<uint8_t> buf(size_t(n + 1) * (kGrh + kMsg));
  ibv_mr* mr = cq ? ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE) : nullptr;
  if (!mr) return fail("pd/cq/mr");
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_UD;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 64;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd, &ia);
  if (!qp) return fail("ibv_create_qp");
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = kQkey;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
    return fail("INIT");
  a = {};
  a.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE)) return fail("RTR");
  a.qp_state = IBV_QPS_RTS;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)) return fail("RTS");

  if (recv_side) {
    if (int e = ibv_attach_mcast(qp, &mgid, 0)) return errno = e, fail("ibv_attach_mcast");
    int join_fd = -1;  // held until exit
    if (argc > 6) {
      ip_mreq m{};
      m.imr_multiaddr = group;
      join_fd = socket(AF_INET, SOCK_DGRAM, 0);
      if (inet_pton(AF_INET, argv[6], &m.imr_interface) != 1 || join_fd < 0 ||
          setsockopt(join_fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m)))
        return fail("IP_ADD_MEMBERSHIP");
    }
    for (uint32_t i = 0; i < n; ++i) {
      ibv_sge s{reinterpret_cast<uint64_t>(buf.data() + size_t(i) * (kGrh + kMsg)), kGrh + kMsg, mr->lkey};
      ibv_recv_wr w{}, *bad = nullptr;
      w.wr_id = i;
      w.sg_list = &s;
      w.num_sge = 1;
      if (ibv_post_recv(qp, &w, &bad)) return fail("ibv_post_recv");
    }
    if (FILE* f = fopen(argv[5], "w"))
      fclose(f);
    else
      return fail("ready file");
    uint32_t got = 0;
    const uint64_t end = now_ms() + kWaitMs;
    while (got < n && now_ms() < end) {
      ibv_wc wc;
      const int k = ibv_poll_cq(cq, 1, &wc);
      if (k < 0) return fail("ibv_poll_cq");
      if (k == 0) {
        usleep(100);
        continue;
      }
      const uint8_t* at = buf.data() + size_t(wc.wr_id) * (kGrh + kMsg);
      const uint32_t i = ntohl(wc.imm_data);
      bool ok = wc.status == IBV_WC_SUCCESS && (wc.wc_flags & IBV_WC_GRH) &&
                (wc.wc_flags & IBV_WC_WITH_IMM) && wc.byte_len == kGrh + kMsg && wc.wr_id == got &&
                i == got && memcmp(at + 20 + 16, &group, 4) == 0;
      for (uint32_t p = 0; ok && p < kMsg; ++p) ok = at[kGrh + p] == pattern(i, p);
      if (!ok) {
        fprintf(stderr, "mcast_peer: datagram %u wrong (status %d, wr_id %llu, imm %u, byte_len %u)\n", got,
                int(wc.status), (unsigned long long)wc.wr_id, i, wc.byte_len);
        return 1;
      }
      ++got;
    }
    if (got < n) {
      fprintf(stderr, "mcast_peer: %u of %u datagrams arrived\n", got, n);
      return 1;
    }
    if (int e = ibv_detach_mcast(qp, &mgid, 0)) return errno = e, fail("ibv_detach_mcast");
    if (join_fd >= 0) close(join_fd);
    printf("mcast_peer: %u datagrams from group %s intact\n", n, argv[3]);
  } else {
    ibv_ah_attr ah{};
    ah.is_global = 1;
    ah.grh.dgid = mgid;
    ah.grh.sgid_index = 1;
    ah.grh.hop_limit = 1;
    ah.port_num = 1;
    ibv_ah* h = ibv_create_ah(pd, &ah);
    if (!h) return fail("ibv_create_ah");
    for (uint32_t i = 0; i < n; ++i) {
      uint8_t* at = buf.data() + size_t(i) * kMsg;
      for (uint32_t p = 0; p < kMsg; ++p) at[p] = pattern(i, p);
      ibv_sge s{reinterpret_cast<uint64_t>(at), kMsg, mr->lkey};
      ibv_send_wr w{}, *bad = nullptr;
      w.opcode = IBV_WR_SEND_WITH_IMM;
      w.imm_data = htonl(i);
      w.send_flags = IBV_SEND_SIGNALED;
      w.sg_list = &s;
      w.num_sge = 1;
      w.wr.ud.ah = h;
      w.wr.ud.remote_qpn = 0xffffff;
      w.wr.ud.remote_qkey = kQkey;
      if (ibv_post_send(qp, &w, &bad)) return fail("ibv_post_send");
      ibv_wc wc;
      const uint64_t end = now_ms() + kWaitMs;
      int k = 0;
      while ((k = ibv_poll_cq(cq, 1, &wc)) == 0 && now_ms() < end) usleep(100);
      if (k != 1 || wc.status != IBV_WC_SUCCESS) return fail("send completion");
      usleep(20000);
    }
    ibv_destroy_ah(h);
    printf("mcast_peer: sent %u datagrams to group %s\n", n, argv[3]);
  }
  ibv_destroy_qp(qp);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return 0;
}
