#include "link/fault_injector.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace uroce::link {

Result<FaultConfig> parse_faults(std::string_view spec) {
  FaultConfig c;
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return Status(EINVAL);
    const std::string_view key = item.substr(0, eq);
    const std::string value(item.substr(eq + 1));
    char* end = nullptr;
    if (key == "seed") {
      c.seed = strtoull(value.c_str(), &end, 0);
      if (value.empty() || *end) return Status(EINVAL);
      continue;
    }
    const double v = strtod(value.c_str(), &end);
    if (value.empty() || *end || !(v >= 0 && v <= 1)) return Status(EINVAL);
    if (key == "drop")
      c.drop = v;
    else if (key == "dup")
      c.dup = v;
    else if (key == "reorder")
      c.reorder = v;
    else if (key == "corrupt")
      c.corrupt = v;
    else
      return Status(EINVAL);
  }
  return c;
}

std::string to_string(const FaultConfig& c) {
  char b[160];
  snprintf(b, sizeof(b), "drop=%g,dup=%g,reorder=%g,corrupt=%g,seed=%llu", c.drop, c.dup, c.reorder,
           c.corrupt, static_cast<unsigned long long>(c.seed));
  return b;
}

FaultInjector::FaultInjector(const FaultConfig& c) : cfg_(c), state_(c.seed ? c.seed : 1) {}

double FaultInjector::uniform() {
  // SplitMix64: a fixed, well-mixed sequence per seed.
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return double(z >> 11) * 0x1.0p-53;
}

void FaultInjector::send(std::span<const uint8_t> pkt, uint64_t tag, const Emit& emit) {
  if (!pkt.empty() && cfg_.corrupt > 0 && uniform() < cfg_.corrupt) {
    scratch_.assign(pkt.begin(), pkt.end());
    // A byte the ICRC covers: never the BTH's resv8a (byte 4: FECN, BECN),
    // which switches may rewrite and the ICRC leaves out, so every packet
    // this corrupts is one a receiver must catch.
    constexpr size_t kResv8a = 4;
    const bool skip = scratch_.size() > kResv8a + 1;
    size_t at = size_t(uniform() * double(scratch_.size() - (skip ? 1 : 0)));
    if (skip && at >= kResv8a) ++at;
    scratch_[at] ^= uint8_t(1 + uint32_t(uniform() * 255));  // never 0: the byte changes
    ++stats_->corrupted;
    ++stats_->out;
    emit(scratch_, tag);
    return;
  }
  ++stats_->out;
  emit(pkt, tag);
}

void FaultInjector::process(std::span<const uint8_t> pkt, const Emit& emit, uint64_t tag) {
  ++stats_->in;
  if (cfg_.drop > 0 && uniform() < cfg_.drop) {
    ++stats_->dropped;
    return;
  }
  if (!holding_ && cfg_.reorder > 0 && uniform() < cfg_.reorder) {
    held_.assign(pkt.begin(), pkt.end());
    held_tag_ = tag;
    holding_ = true;
    ++stats_->reordered;
    return;
  }
  const bool twice = cfg_.dup > 0 && uniform() < cfg_.dup;
  send(pkt, tag, emit);
  if (twice) {
    ++stats_->duplicated;
    send(pkt, tag, emit);
  }
  flush(emit);
}

void FaultInjector::flush(const Emit& emit) {
  if (!holding_) return;
  holding_ = false;
  std::vector<uint8_t> h;
  h.swap(held_);
  send(h, held_tag_, emit);
}

}  // namespace uroce::link
