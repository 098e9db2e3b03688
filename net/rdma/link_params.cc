#include "net/rdma/link_params.h"

#include <algorithm>
#include <set>

#include "core/strings.h"
#include "net/rdma/credits.h"

namespace isometry::rdma {
namespace {

constexpr uint32_t k24Bits = 0xFFFFFF;

Status Bad(std::string_view field, std::string_view why) {
  return absl::InvalidArgumentError(StrCat("RDMA link parameters: ", field, " ", why));
}

bool ZeroGid(const ibv_gid& gid) {
  return std::all_of(std::begin(gid.raw), std::end(gid.raw), [](uint8_t b) { return b == 0; });
}

}  // namespace

int MtuBytes(ibv_mtu mtu) {
  switch (mtu) {
    case IBV_MTU_256:
      return 256;
    case IBV_MTU_512:
      return 512;
    case IBV_MTU_1024:
      return 1024;
    case IBV_MTU_2048:
      return 2048;
    case IBV_MTU_4096:
      return 4096;
  }
  return 0;
}

bool MtuFromBytes(uint32_t bytes, ibv_mtu& out) {
  for (ibv_mtu m : {IBV_MTU_256, IBV_MTU_512, IBV_MTU_1024, IBV_MTU_2048, IBV_MTU_4096}) {
    if (static_cast<uint32_t>(MtuBytes(m)) == bytes) {
      out = m;
      return true;
    }
  }
  return false;
}

Status ValidateLinkParams(const LinkParams& p, uint32_t qps) {
  if (p.qps.size() != qps) {
    return Bad("qps", StrCat("has ", p.qps.size(), " queue pairs; this node uses ", qps,
                             " per peer (rdma.qps_per_peer must match on both nodes)"));
  }
  std::set<uint32_t> seen;
  for (size_t i = 0; i < p.qps.size(); ++i) {
    const QpAddress& q = p.qps[i];
    const std::string at = StrCat("qps[", i, "]");
    if (q.qpn == 0 || q.qpn > k24Bits) {
      return Bad(at, StrCat("has QP number ", q.qpn, " (1 to 2^24-1)"));
    }
    if (!seen.insert(q.qpn).second) return Bad(at, StrCat("repeats QP number ", q.qpn));
    if (q.psn > k24Bits) return Bad(at, StrCat("has PSN ", q.psn, " (24 bits)"));
    if (MtuBytes(q.mtu) == 0) {
      return Bad(at, StrCat("has MTU code ", static_cast<int>(q.mtu), " (256 to 4096 bytes)"));
    }
    if (q.lid == 0 && ZeroGid(q.gid)) return Bad(at, "has neither a LID nor a GID");
  }
  const RingAddress& r = p.ring;
  const RingShape shape{r.slots, r.slot_bytes};
  ISO_RETURN_IF_ERROR(shape.Validate());
  // slot_bytes <= 2^32 and slots <= 2^10: the size fits in 43 bits.
  const uint64_t size = r.slot_bytes * r.slots;
  if (r.addr > ~uint64_t{0} - size) {
    return Bad("ring", StrCat("of ", size, " bytes at ", r.addr, " wraps past 2^64"));
  }
  if (r.region_addr > ~uint64_t{0} - r.region_length) {
    return Bad("ring.region",
               StrCat("of ", r.region_length, " bytes at ", r.region_addr, " wraps past 2^64"));
  }
  if (r.addr < r.region_addr || r.addr + size > r.region_addr + r.region_length) {
    return Bad("ring",
               StrCat("[", r.addr, ", +", size, ") is not inside the region its rkey covers [",
                      r.region_addr, ", +", r.region_length, ")"));
  }
  return OkStatus();
}

}  // namespace isometry::rdma
