#include "wire/caps_mad.h"

#include <endian.h>

#include <cstring>

namespace uroce::wire::caps {

namespace {
// The data after the 24-byte header: the magic, then the flags.
constexpr size_t kMagicAt = cm::kMadHeaderSize;
constexpr size_t kFlagsAt = kMagicAt + 8;
}  // namespace

void encode(const Caps& c, std::span<uint8_t, cm::kMadSize> out) {
  cm::MadHeader h;
  h.mgmt_class = kClass;
  h.class_version = kClassVersion;
  h.method = c.reply ? kMethodGetResp : kMethodGet;
  h.tid = c.tid;
  cm::encode_mad_header(h, kAttrCaps, out.data());
  const uint64_t magic = htobe64(kMagic);
  memcpy(out.data() + kMagicAt, &magic, 8);
  const uint32_t flags = htobe32(c.reply ? c.flags : 0);
  memcpy(out.data() + kFlagsAt, &flags, 4);
}

bool decode(std::span<const uint8_t> in, Caps* c) {
  cm::MadHeader h;
  if (in.size() != cm::kMadSize || !cm::read_mad_header(in, &h)) return false;
  if (h.base_version != cm::kBaseVersion || h.mgmt_class != kClass || h.class_version != kClassVersion ||
      (h.method != kMethodGet && h.method != kMethodGetResp) || h.attr_id != kAttrCaps || h.status != 0)
    return false;
  uint64_t magic;
  uint32_t flags;
  memcpy(&magic, in.data() + kMagicAt, 8);
  memcpy(&flags, in.data() + kFlagsAt, 4);
  if (be64toh(magic) != kMagic) return false;
  c->reply = h.method == kMethodGetResp;
  c->tid = h.tid;
  c->flags = c->reply ? be32toh(flags) : 0;
  return true;
}

}  // namespace uroce::wire::caps
