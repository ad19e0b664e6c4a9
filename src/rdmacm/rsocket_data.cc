// rsockets' data path: the endpoint's buffers, the credit protocol, and the
// stream send and receive (rsocket.h says what travels).
#include <endian.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/export.h"
#include "rdmacm/rsocket.h"

namespace uroce::rdmacm::rs {

namespace {

uint8_t* map_zeroed(size_t len) {
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
}

void unmap(uint8_t* p, size_t len) {
  if (p) munmap(p, len);
}

size_t sbuf_total(const Rsocket* rs) {
  return rs->sbuf_size + (rs->sq_inline < sizeof(WireSge) ? kCtrlSlots * sizeof(WireSge) : 0);
}

int post_recv(Rsocket* rs) {
  ibv_recv_wr wr{};
  ibv_recv_wr* bad;
  wr.wr_id = kRecvFlag;
  return ibv_post_recv(rs->id->qp, &wr, &bad);
}

/// One RDMA WRITE to (addr, rkey); its wr_id is `wr_data` (an immediate's
/// form: op and count), so its completion says what it freed.
int post_rdma_write(Rsocket* rs, ibv_wr_opcode opcode, ibv_sge* sgl, int nsge, uint32_t wr_data, int flags,
                    uint64_t addr, uint32_t rkey) {
  ibv_send_wr wr{};
  ibv_send_wr* bad;
  wr.wr_id = wr_data;
  wr.sg_list = sgl;
  wr.num_sge = nsge;
  wr.opcode = opcode;
  wr.send_flags = flags;
  if (opcode == IBV_WR_RDMA_WRITE_WITH_IMM) wr.imm_data = htobe32(wr_data);
  wr.wr.rdma.remote_addr = addr;
  wr.wr.rdma.rkey = rkey;
  const int rc = ibv_post_send(rs->id->qp, &wr, &bad);
  if (rc) errno = rc;
  return rc ? -1 : 0;
}

/// A WRITE WITH IMMEDIATE `imm` (no data: only the immediate arrives).
int post_write_imm(Rsocket* rs, ibv_sge* sgl, int nsge, uint32_t imm, int flags, uint64_t addr,
                   uint32_t rkey) {
  return post_rdma_write(rs, IBV_WR_RDMA_WRITE_WITH_IMM, sgl, nsge, imm, flags, addr, rkey);
}

WireSge load_target(Rsocket* rs, int i) {
  // The peer writes these entries with RDMA WRITEs at any time.
  const volatile WireSge* e = &rs->target_sgl()[i];
  WireSge s;
  s.addr = e->addr;
  s.key = e->key;
  s.length = e->length;
  return s;
}

void put_sge(WireSge* out, uint64_t addr, uint32_t key, uint32_t len, bool swap) {
  out->addr = swap ? __builtin_bswap64(addr) : addr;
  out->key = swap ? __builtin_bswap32(key) : key;
  out->length = swap ? __builtin_bswap32(len) : len;
}

bool ctrl_avail(const Rsocket* rs) { return rs->ctrl_seqno != rs->ctrl_max_seqno; }

/// Gives the peer credits: a freed half of the ring (when one is free) and a
/// new message limit.
void send_credits(Rsocket* rs) {
  rs->ctrl_seqno++;
  rs->rseq_comp = uint16_t(rs->rseq_no + (rs->rq_size >> 1));
  const uint32_t imm = imm_of(kOpSgl, uint16_t(rs->rseq_no + rs->rq_size));
  const uint32_t half = rs->rbuf_size >> 1;
  if (rs->rbuf_avail < half) {
    post_write_imm(rs, nullptr, 0, imm, 0, 0, 0);
    return;
  }
  WireSge s;
  put_sge(&s, reinterpret_cast<uintptr_t>(rs->rbuf + rs->rbuf_free_offset), rs->rmr->rkey, half,
          rs->swap_sgl);
  ibv_sge sge{};
  int flags = 0;
  if (rs->sq_inline >= sizeof s) {
    sge.addr = reinterpret_cast<uintptr_t>(&s);
    flags = IBV_SEND_INLINE;
  } else {
    uint8_t* slot = rs->sbuf + rs->sbuf_size + sizeof(WireSge) * (rs->ctrl_seqno & (kCtrlSlots - 1));
    memcpy(slot, &s, sizeof s);
    sge.addr = reinterpret_cast<uintptr_t>(slot);
    sge.lkey = rs->smr->lkey;
  }
  sge.length = sizeof s;
  post_write_imm(rs, &sge, 1, imm, flags, rs->remote_sgl.addr + rs->remote_sge * sizeof(WireSge),
                 rs->remote_sgl.key);
  rs->rbuf_avail -= half;
  rs->rbuf_free_offset += half;
  if (rs->rbuf_free_offset >= rs->rbuf_size) rs->rbuf_free_offset = 0;
  if (++rs->remote_sge == int(rs->remote_sgl.length)) rs->remote_sge = 0;
}

void update_credits(Rsocket* rs) {
  if (!(rs->state & kConnected) || !ctrl_avail(rs)) return;
  if (rs->rbuf_avail >= (rs->rbuf_size >> 1) || int16_t(rs->rseq_no - rs->rseq_comp) >= 0) send_credits(rs);
}

void poll_cq(Rsocket* rs) {
  ibv_wc wc[16];
  int n, received = 0;
  while ((n = ibv_poll_cq(rs->cq, 16, wc)) > 0) {
    for (int i = 0; i < n; i++) {
      const ibv_wc& w = wc[i];
      if (w.wr_id & kRecvFlag) {
        if (w.status != IBV_WC_SUCCESS) continue;
        received++;
        const uint32_t imm = be32toh(w.imm_data);
        switch (op_of(imm)) {
          case kOpSgl:
            rs->sseq_comp = uint16_t(data_of(imm));
            break;
          case kOpIomapSgl:
          case kOpWrite:
            break;  // the table entry is in place; nothing to queue
          case kOpCtrl:
            if (data_of(imm) == kCtrlDisconnect) {
              rs->state = kDisconnected;
            } else if (data_of(imm) == kCtrlShutdown) {
              if (rs->state & kWritable)
                rs->state &= ~kReadable;
              else
                rs->state = kDisconnected;
            }
            break;
          default:
            rs->rmsg[rs->rmsg_tail] = data_of(imm);
            if (++rs->rmsg_tail == rs->rmsg.size()) rs->rmsg_tail = 0;
            break;
        }
        continue;
      }
      const uint32_t imm = uint32_t(w.wr_id);
      switch (op_of(imm)) {
        case kOpSgl:
          rs->ctrl_max_seqno++;
          break;
        case kOpCtrl:
          rs->ctrl_max_seqno++;
          if (data_of(imm) == kCtrlDisconnect) rs->state = kDisconnected;
          break;
        case kOpIomapSgl:
          rs->sqe_avail++;
          rs->sbuf_avail += sizeof(IomapEntry);
          break;
        default:  // data, riowrite
          rs->sqe_avail++;
          rs->sbuf_avail += data_of(imm);
          break;
      }
      if (w.status != IBV_WC_SUCCESS && (rs->state & kConnected)) {
        rs->state = kError;
        rs->err = EIO;
      }
    }
  }
  if (rs->state & kConnected) {
    while (received-- > 0) {
      if (post_recv(rs) != 0) {
        rs->state = kError;
        rs->err = ENOMEM;
        break;
      }
    }
  }
}

/// Copies `len` bytes from the iovec cursor (*iov, *off) to dst, advancing it.
void gather(uint8_t* dst, const iovec** iov, size_t* off, size_t len) {
  while (len) {
    const size_t n = std::min(len, (*iov)->iov_len - *off);
    memcpy(dst, static_cast<const uint8_t*>((*iov)->iov_base) + *off, n);
    dst += n;
    len -= n;
    *off += n;
    if (*off == (*iov)->iov_len) {
      ++*iov;
      *off = 0;
    }
  }
}

/// Stages `len` bytes of the iovec cursor in sbuf (or inline) and posts one
/// WRITE of them to (addr, rkey): with immediate `imm` (a message: it takes
/// a credit), or a plain one (riowrite) whose completion frees `len`.
int post_staged(Rsocket* rs, const iovec** iov, size_t* off, uint32_t len, uint32_t imm, bool with_imm,
                uint64_t addr, uint32_t rkey) {
  ibv_sge sgl[2]{};
  int nsge = 1, flags = 0;
  uint8_t inl[256];
  if (len <= rs->sq_inline && len <= sizeof inl) {
    gather(inl, iov, off, len);
    sgl[0].addr = reinterpret_cast<uintptr_t>(inl);
    sgl[0].length = len;
    flags = IBV_SEND_INLINE;
  } else {
    const uint32_t left = rs->sbuf_size - rs->spos;
    sgl[0].addr = reinterpret_cast<uintptr_t>(rs->sbuf + rs->spos);
    sgl[0].lkey = rs->smr->lkey;
    if (len <= left) {
      gather(rs->sbuf + rs->spos, iov, off, len);
      sgl[0].length = len;
      rs->spos = len < left ? rs->spos + len : 0;
    } else {
      gather(rs->sbuf + rs->spos, iov, off, left);
      gather(rs->sbuf, iov, off, len - left);
      sgl[0].length = left;
      sgl[1] = {reinterpret_cast<uintptr_t>(rs->sbuf), len - left, rs->smr->lkey};
      nsge = 2;
      rs->spos = len - left;
    }
  }
  rs->sqe_avail--;
  rs->sbuf_avail -= len;
  if (with_imm) {
    rs->sseq_no++;
    return post_write_imm(rs, sgl, nsge, imm, flags, addr, rkey);
  }
  return post_rdma_write(rs, IBV_WR_RDMA_WRITE, sgl, nsge, imm_of(kOpWrite, len), flags, addr, rkey);
}

bool conn_can_send(Rsocket* rs) { return can_send(rs) || !(rs->state & kWritable); }
bool conn_have_rdata(Rsocket* rs) { return have_rdata(rs) || !(rs->state & kReadable); }
bool conn_ctrl_free(Rsocket* rs) { return ctrl_avail(rs) || !(rs->state & kConnected); }

bool nonblocking(const Rsocket* rs, int flags) {
  return (rs->fs_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT);
}

/// Waits (or not, per the socket and `flags`) until a send may go out. 0, or
/// -1 with errno (ECONNRESET: the connection's sending half ended).
int wait_can_send(Rsocket* rs, std::unique_lock<std::mutex>& lk, int flags) {
  if (can_send(rs)) return 0;
  if (wait_until(rs, lk, nonblocking(rs, flags), conn_can_send) != 0) return -1;
  if (rs->state & kWritable) return 0;
  errno = ECONNRESET;
  return -1;
}

/// The size of the next WRITE of a long send: 2 KiB, doubling to 64 KiB.
uint32_t next_xfer(size_t left, uint32_t* olen) {
  const uint32_t xfer = left > *olen ? *olen : uint32_t(left);
  if (left > *olen && *olen < kMaxXfer) *olen <<= 1;
  return xfer;
}

/// Publishes the riomap'd buffers the peer has not heard of.
int send_iomaps(Rsocket* rs, std::unique_lock<std::mutex>& lk, int flags) {
  int rc = 0;
  for (IoMap& m : rs->iomaps) {
    if (m.sent || m.index < 0) continue;
    if ((rc = wait_can_send(rs, lk, flags)) != 0) break;
    IomapEntry e;
    e.offset = rs->swap_sgl ? __builtin_bswap64(m.offset) : m.offset;
    put_sge(&e.sge, reinterpret_cast<uintptr_t>(m.mr->addr), m.mr->rkey, uint32_t(m.mr->length),
            rs->swap_sgl);
    iovec v{&e, sizeof e};
    const iovec* cur = &v;
    size_t off = 0;
    rc = post_staged(rs, &cur, &off, sizeof e, imm_of(kOpIomapSgl, uint32_t(m.index)), true,
                     rs->remote_iomap.addr + uint64_t(m.index) * sizeof(IomapEntry), rs->remote_iomap.key);
    m.sent = true;
    if (rc) break;
  }
  rs->iomap_pending = false;
  for (const IoMap& m : rs->iomaps)
    if (!m.sent && m.index >= 0) rs->iomap_pending = true;
  return rc;
}

}  // namespace

bool have_rdata(Rsocket* rs) { return rs->rmsg_head != rs->rmsg_tail; }

bool can_send(Rsocket* rs) {
  return rs->sqe_avail > 0 && rs->sbuf_avail >= kSendLowWater && rs->sseq_no != rs->sseq_comp &&
         load_target(rs, rs->target_sge).length != 0;
}

bool all_sends_done(Rsocket* rs) {
  return int(rs->ctrl_max_seqno - rs->ctrl_seqno) + rs->sqe_avail == int(rs->sq_size) ||
         !(rs->state & kConnected);
}

int create_ep(Rsocket* rs) {
  rs->sq_size = std::clamp<uint16_t>(rs->sq_size, kQpMin, kQpMax);
  rs->rq_size = std::clamp<uint16_t>(rs->rq_size, kQpMin, kQpMax);
  ibv_context* ctx = rs->id->verbs;
  rs->cch = ibv_create_comp_channel(ctx);
  if (!rs->cch) return -1;
  fcntl(rs->cch->fd, F_SETFL, fcntl(rs->cch->fd, F_GETFL) | O_NONBLOCK);
  rs->cq = ibv_create_cq(ctx, rs->sq_size + rs->rq_size, rs, rs->cch, 0);
  if (!rs->cq) return -1;
  ibv_qp_init_attr a{};
  a.qp_context = rs;
  a.send_cq = a.recv_cq = rs->cq;
  a.qp_type = IBV_QPT_RC;
  a.sq_sig_all = 1;
  a.cap.max_send_wr = rs->sq_size;
  a.cap.max_recv_wr = rs->rq_size;
  a.cap.max_send_sge = 2;
  a.cap.max_recv_sge = 1;
  a.cap.max_inline_data = rs->sq_inline;
  if (rdma_create_qp(rs->id, nullptr, &a) != 0) return -1;
  rs->sq_inline = uint16_t(std::min<uint32_t>(a.cap.max_inline_data, kQpMax));
  ibv_pd* pd = rs->id->qp->pd;

  rs->sbuf = map_zeroed(sbuf_total(rs));
  rs->tbuf_len = kSglSize * sizeof(WireSge) + rs->iomap_size * sizeof(IomapEntry);
  rs->tbuf = map_zeroed(rs->tbuf_len);
  rs->rbuf = map_zeroed(rs->rbuf_size);
  if (!rs->sbuf || !rs->tbuf || !rs->rbuf) {
    errno = ENOMEM;
    return -1;
  }
  constexpr int kRemote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  rs->smr = ibv_reg_mr(pd, rs->sbuf, sbuf_total(rs), IBV_ACCESS_LOCAL_WRITE);
  rs->tmr = ibv_reg_mr(pd, rs->tbuf, rs->tbuf_len, kRemote);
  rs->rmr = ibv_reg_mr(pd, rs->rbuf, rs->rbuf_size, kRemote);
  if (!rs->smr || !rs->tmr || !rs->rmr) return -1;

  rs->rmsg.assign(rs->rq_size + 1, 0);
  rs->spos = 0;
  rs->sbuf_avail = rs->sbuf_size;
  rs->rbuf_free_offset = rs->rbuf_avail = rs->rbuf_size >> 1;  // the first half goes in ConnData
  rs->sqe_avail = rs->sq_size - int(rs->ctrl_max_seqno);
  rs->rseq_comp = rs->rq_size >> 1;
  for (uint16_t i = 0; i < rs->rq_size; i++) {
    const int rc = post_recv(rs);
    if (rc) {
      errno = rc;
      return -1;
    }
  }
  if (ibv_req_notify_cq(rs->cq, 0) == 0) rs->armed = true;
  return 0;
}

void destroy_ep(Rsocket* rs) {
  for (IoMap& m : rs->iomaps)
    if (m.mr) ibv_dereg_mr(m.mr);
  rs->iomaps.clear();
  if (rs->id && rs->id->qp) rdma_destroy_qp(rs->id);
  if (rs->smr) ibv_dereg_mr(rs->smr);
  if (rs->tmr) ibv_dereg_mr(rs->tmr);
  if (rs->rmr) ibv_dereg_mr(rs->rmr);
  rs->smr = rs->tmr = rs->rmr = nullptr;
  if (rs->cq) ibv_destroy_cq(rs->cq);
  if (rs->cch) ibv_destroy_comp_channel(rs->cch);
  rs->cq = nullptr;
  rs->cch = nullptr;
  unmap(rs->sbuf, sbuf_total(rs));
  unmap(rs->tbuf, rs->tbuf_len);
  unmap(rs->rbuf, rs->rbuf_size);
  rs->sbuf = rs->tbuf = rs->rbuf = nullptr;
}

void format_conn(Rsocket* rs, ConnData* c) {
  memset(c, 0, sizeof *c);
  c->version = 1;
  c->flags = kConnFlagIomap | (__BYTE_ORDER == __BIG_ENDIAN ? kConnFlagNet : 0);
  c->credits = htobe16(rs->rq_size);
  c->iomap_scale = uint8_t(rs->iomap_size <= 128 ? rs->iomap_size : (128 | (rs->iomap_size >> 8)));
  c->target_sgl.addr = htobe64(reinterpret_cast<uintptr_t>(rs->tbuf));
  c->target_sgl.length = htobe32(kSglSize);
  c->target_sgl.key = htobe32(rs->tmr->rkey);
  c->data_buf.addr = htobe64(reinterpret_cast<uintptr_t>(rs->rbuf));
  c->data_buf.length = htobe32(rs->rbuf_size >> 1);
  c->data_buf.key = htobe32(rs->rmr->rkey);
}

void save_conn(Rsocket* rs, const ConnData& c) {
  rs->remote_sgl = {be64toh(c.target_sgl.addr), be32toh(c.target_sgl.key), be32toh(c.target_sgl.length)};
  rs->remote_sge = 1;  // entry 0 is the ConnData's data_buf
  rs->swap_sgl = bool(c.flags & kConnFlagNet) != (__BYTE_ORDER == __BIG_ENDIAN);
  if (c.flags & kConnFlagIomap) {
    const uint32_t scale = c.iomap_scale;
    rs->remote_iomap.addr = rs->remote_sgl.addr + sizeof(WireSge) * rs->remote_sgl.length;
    rs->remote_iomap.length = scale <= 128 ? scale : (scale & ~128u) << 8;
    rs->remote_iomap.key = rs->remote_sgl.key;
  }
  WireSge* t = rs->target_sgl();
  t[0] = {be64toh(c.data_buf.addr), be32toh(c.data_buf.key), be32toh(c.data_buf.length)};
  rs->target_sge = 0;
  rs->sseq_comp = be16toh(c.credits);
}

void progress_cq(Rsocket* rs) {
  if (!rs->cq) return;
  update_credits(rs);
  poll_cq(rs);
  update_credits(rs);
}

int send_ctrl(Rsocket* rs, std::unique_lock<std::mutex>& lk, uint32_t code) {
  if (!ctrl_avail(rs) && wait_until(rs, lk, false, conn_ctrl_free) != 0) return -1;
  if (!(rs->state & kConnected) || !ctrl_avail(rs)) return 0;
  rs->ctrl_seqno++;
  return post_write_imm(rs, nullptr, 0, imm_of(kOpCtrl, code), 0, 0, 0);
}

ssize_t send_iov(Rsocket* rs, const iovec* iov, int iovcnt, int flags) {
  std::unique_lock lk(rs->mu);
  if (rs->state & kOpening) {
    if (progress_open(rs, lk, nonblocking(rs, flags)) != 0) {
      if (errno == EINPROGRESS) errno = EAGAIN;
      return -1;
    }
  }
  size_t len = 0;
  for (int i = 0; i < iovcnt; i++) len += iov[i].iov_len;
  if (!(rs->state & kWritable)) {
    errno = (rs->state & (kDisconnected | kError)) ? ECONNRESET : ENOTCONN;
    return -1;
  }
  int rc = 0;
  if (rs->iomap_pending && (rc = send_iomaps(rs, lk, flags)) != 0) return -1;
  const iovec* cur = iov;
  size_t off = 0;
  while (cur != iov + iovcnt && cur->iov_len == 0) ++cur;
  size_t left = len;
  uint32_t olen = kFirstXfer;
  while (left) {
    if ((rc = wait_can_send(rs, lk, flags)) != 0) break;
    uint32_t xfer = next_xfer(left, &olen);
    const WireSge t = load_target(rs, rs->target_sge);
    xfer = std::min({xfer, rs->sbuf_avail, t.length});
    // Take the space in the peer's ring before writing into it.
    WireSge* te = &rs->target_sgl()[rs->target_sge];
    te->addr = t.addr + xfer;
    te->length = t.length - xfer;
    if (te->length == 0 && ++rs->target_sge == int(kSglSize)) rs->target_sge = 0;
    rc = post_staged(rs, &cur, &off, xfer, imm_of(kOpData, xfer), true, t.addr, t.key);
    if (rc) break;
    left -= xfer;
  }
  return (rc && left == len) ? -1 : ssize_t(len - left);
}

ssize_t recv_iov(Rsocket* rs, const iovec* iov, int iovcnt, int flags) {
  std::unique_lock lk(rs->mu);
  if (rs->state & kOpening) {
    if (progress_open(rs, lk, nonblocking(rs, flags)) != 0) {
      if (errno == EINPROGRESS) errno = EAGAIN;
      return -1;
    }
  }
  if (!(rs->state & (kConnected | kDisconnected | kError)) && !have_rdata(rs)) {
    errno = ENOTCONN;
    return -1;
  }
  size_t len = 0;
  for (int i = 0; i < iovcnt; i++) len += iov[i].iov_len;
  size_t left = len;
  int rc = 0;
  const iovec* cur = iov;
  size_t cur_off = 0;
  auto scatter = [&](const uint8_t* src, size_t n) {
    while (n) {
      while (cur->iov_len == cur_off) {
        ++cur;
        cur_off = 0;
      }
      const size_t k = std::min(n, cur->iov_len - cur_off);
      memcpy(static_cast<uint8_t*>(cur->iov_base) + cur_off, src, k);
      src += k;
      n -= k;
      cur_off += k;
    }
  };
  do {
    if (!have_rdata(rs)) {
      rc = wait_until(rs, lk, nonblocking(rs, flags), conn_have_rdata);
      if (rc) break;
    }
    if (flags & MSG_PEEK) {
      uint32_t head = rs->rmsg_head, pos = rs->rbuf_offset;
      while (left && head != rs->rmsg_tail) {
        size_t n = std::min<size_t>(left, rs->rmsg[head]);
        if (n == rs->rmsg[head] && ++head == rs->rmsg.size()) head = 0;
        left -= n;
        while (n) {
          const size_t k = std::min<size_t>(n, rs->rbuf_size - pos);
          scatter(rs->rbuf + pos, k);
          pos = (pos + k) % rs->rbuf_size;
          n -= k;
        }
      }
      break;
    }
    while (left && have_rdata(rs)) {
      size_t n;
      if (left < rs->rmsg[rs->rmsg_head]) {
        n = left;
        rs->rmsg[rs->rmsg_head] -= uint32_t(left);
      } else {
        n = rs->rmsg[rs->rmsg_head];
        rs->rseq_no++;
        if (++rs->rmsg_head == rs->rmsg.size()) rs->rmsg_head = 0;
      }
      left -= n;
      while (n) {
        const size_t k = std::min<size_t>(n, rs->rbuf_size - rs->rbuf_offset);
        scatter(rs->rbuf + rs->rbuf_offset, k);
        rs->rbuf_offset = uint32_t((rs->rbuf_offset + k) % rs->rbuf_size);
        rs->rbuf_avail += uint32_t(k);
        n -= k;
      }
    }
    update_credits(rs);
  } while (left && (flags & MSG_WAITALL) && (rs->state & kReadable));
  return (rc && left == len) ? -1 : ssize_t(len - left);
}

ssize_t write_iomap(Rsocket* rs, const void* buf, size_t count, uint64_t offset, int flags) {
  std::unique_lock lk(rs->mu);
  if (!(rs->state & kWritable)) {
    errno = (rs->state & (kDisconnected | kError)) ? ECONNRESET : ENOTCONN;
    return -1;
  }
  if (rs->iomap_pending && send_iomaps(rs, lk, flags) != 0) return -1;
  iovec v{const_cast<void*>(buf), count};
  const iovec* cur = &v;
  size_t off = 0, left = count;
  uint32_t olen = kFirstXfer;
  int rc = 0;
  bool have = false;
  IomapEntry e{};
  while (left) {
    if (!have || offset >= e.offset + e.sge.length) {
      have = false;
      for (uint16_t i = 0; i < rs->iomap_size && !have; i++) {
        const volatile IomapEntry* t = &rs->target_iomap()[i];
        e.offset = t->offset;
        e.sge.addr = t->sge.addr;
        e.sge.key = t->sge.key;
        e.sge.length = t->sge.length;
        have = offset >= e.offset && offset < e.offset + e.sge.length;
      }
      if (!have) break;
    }
    if ((rc = wait_can_send(rs, lk, flags)) != 0) break;
    uint32_t xfer = next_xfer(left, &olen);
    xfer = uint32_t(std::min<uint64_t>({xfer, rs->sbuf_avail, e.offset + e.sge.length - offset}));
    rc = post_staged(rs, &cur, &off, xfer, 0, false, e.sge.addr + (offset - e.offset), e.sge.key);
    if (rc) break;
    left -= xfer;
    offset += xfer;
  }
  return (rc && left == count) ? -1 : ssize_t(count - left);
}

}  // namespace uroce::rdmacm::rs

using uroce::rdmacm::rs::IoMap;
using uroce::rdmacm::rs::Rsocket;
namespace rsd = uroce::rdmacm::rs;

// riomap/riounmap/riowrite: writes into a buffer the peer published.
UROCE_EXPORT off_t riomap(int fd, void* buf, size_t len, int prot, int, off_t offset) {
  Rsocket* rs = rsd::lookup(fd);
  if (!rs) return errno = EBADF, -1;
  std::lock_guard lk(rs->mu);
  if (!rs->id || !rs->id->qp || (prot & ~(PROT_WRITE | PROT_NONE))) return errno = EINVAL, -1;
  IoMap m{};
  m.index = -1;
  int access = IBV_ACCESS_LOCAL_WRITE;
  if (prot & PROT_WRITE) {
    std::vector<bool> used(rs->remote_iomap.length);
    for (const IoMap& o : rs->iomaps)
      if (o.index >= 0) used[o.index] = true;
    for (uint32_t i = 0; i < used.size(); i++)
      if (!used[i]) {
        m.index = int(i);
        break;
      }
    if (m.index < 0) return errno = ENOMEM, -1;
    access |= IBV_ACCESS_REMOTE_WRITE;
  }
  m.mr = ibv_reg_mr(rs->id->qp->pd, buf, len, access);
  if (!m.mr) return -1;
  m.offset = offset == -1 ? uint64_t(reinterpret_cast<uintptr_t>(buf)) : uint64_t(offset);
  rs->iomaps.push_back(m);
  if (m.index >= 0) rs->iomap_pending = true;
  return off_t(m.offset);
}

UROCE_EXPORT int riounmap(int fd, void* buf, size_t len) {
  Rsocket* rs = rsd::lookup(fd);
  if (!rs) return errno = EBADF, -1;
  std::lock_guard lk(rs->mu);
  for (auto it = rs->iomaps.begin(); it != rs->iomaps.end(); ++it) {
    if (it->mr->addr == buf && it->mr->length == len) {
      ibv_dereg_mr(it->mr);
      rs->iomaps.erase(it);
      return 0;
    }
  }
  return errno = EINVAL, -1;
}

UROCE_EXPORT size_t riowrite(int fd, const void* buf, size_t count, off_t offset, int flags) {
  Rsocket* rs = rsd::lookup(fd);
  if (!rs) return errno = EBADF, size_t(-1);
  return size_t(rsd::write_iomap(rs, buf, count, uint64_t(offset), flags));
}
