// The receive side the protocol tests' fake environments share: posted
// receive buffers (or, with auto_post, a fresh buffer for every claim),
// placement with a length check, and a record of each completion with the
// bytes its buffer holds.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

#include "transport/rc_responder.h"

namespace uroce::transport {

struct FakeReceives : ResponderEnv {
  std::deque<std::vector<uint8_t>> posted;  // oldest first
  size_t auto_post = 0;                     // > 0: every claim gets a new buffer of this size
  std::vector<std::vector<uint8_t>> claimed;
  struct Completion {
    uint64_t wr_id;
    transport::WcStatus st;
    uint32_t len;
    RecvInfo info;
    std::vector<uint8_t> data;
  };
  std::vector<Completion> done;
  uint64_t next_wr = 1;

  bool claim_recv(RecvTarget* out) override {
    if (auto_post) {
      claimed.emplace_back(auto_post);
    } else {
      if (posted.empty()) return false;
      claimed.push_back(posted.front());
      posted.pop_front();
    }
    out->wr_id = next_wr++;
    out->handle = claimed.size() - 1;
    return true;
  }
  Access place_recv(const RecvTarget& r, uint64_t off, std::span<const uint8_t> b) override {
    auto& buf = claimed[r.handle];
    if (off + b.size() > buf.size()) return Access::kLengthError;
    std::copy(b.begin(), b.end(), buf.begin() + long(off));
    return Access::kOk;
  }
  void complete_recv(const RecvTarget& r, transport::WcStatus st, uint32_t len,
                     const RecvInfo& info) override {
    const auto& b = claimed[r.handle];
    done.push_back({r.wr_id, st, len, info,
                    std::vector<uint8_t>(b.begin(), b.begin() + long(std::min<size_t>(len, b.size())))});
  }
};

}  // namespace uroce::transport
