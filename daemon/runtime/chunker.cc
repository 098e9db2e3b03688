#include "daemon/runtime/chunker.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>

#include "core/checked.h"

namespace isometry {

namespace {

// Dimensions ordered from the source layout's outermost to innermost.
std::array<int, kMaxDims> OuterFirst(const Layout& l) {
  std::array<int, kMaxDims> pos{};
  const auto& comps = l.components();
  for (size_t i = 0; i < comps.size(); ++i) {
    if (comps[i].kind != LayoutComponent::Kind::kFields) {
      pos[comps[i].dim] = std::max(pos[comps[i].dim], static_cast<int>(i));
    }
  }
  // Insertion sort: at most kMaxDims entries (std::sort trips g++ 12's
  // -Warray-bounds on a 4-element array).
  std::array<int, kMaxDims> order{};
  for (int d = 0; d < l.dims(); ++d) {
    int i = d;
    while (i > 0 && pos[order[i - 1]] < pos[d]) {
      order[i] = order[i - 1];
      --i;
    }
    order[i] = d;
  }
  return order;
}

// lcm(a, b) for a, b >= 1, or INT64_MAX where it does not fit (std::lcm
// is undefined then). Blocks come from client layouts, up to 2^62 each; an
// alignment beyond any extent only means "do not align", as INT64_MAX does.
int64_t SaturatingLcm(int64_t a, int64_t b) {
  const std::optional<int64_t> l = CheckedMul(a / std::gcd(a, b), b);
  return l ? *l : std::numeric_limits<int64_t>::max();
}

Box ExtentBox(const Box& box, const std::array<int64_t, kMaxDims>& ext) {
  Box b;
  b.dims = box.dims;
  for (int d = 0; d < box.dims; ++d) b.hi[d] = ext[d];
  return b;
}

}  // namespace

Result<ChunkGrid> ChunkGrid::Make(const Box& box, const FieldSpace& fields,
                                  const std::vector<Layout>& layouts,
                                  const std::vector<bool>& intermediate, uint64_t target_bytes,
                                  uint64_t slot_limit) {
  ChunkGrid g;
  g.box_ = box;
  g.order_ = OuterFirst(layouts.front());
  const int dims = box.dims;
  const uint64_t entry = fields.total_bytes();
  for (int d = 0; d < dims; ++d) g.ext_[d] = std::max<int64_t>(box.extent(d), 1);

  // Blocking factors of each dimension along the path: chunk extents that
  // are multiples of their lcm leave no padding in any slot.
  std::array<int64_t, kMaxDims> align{};
  for (int d = 0; d < dims; ++d) {
    align[d] = 1;
    for (const Layout& l : layouts) {
      if (const int64_t b = l.block_of(d)) align[d] = SaturatingLcm(align[d], b);
    }
  }

  auto rest_bytes = [&](int skip) {
    uint64_t r = entry;
    for (int e = 0; e < dims; ++e) {
      if (e != skip) r *= static_cast<uint64_t>(g.ext_[e]);
    }
    return r;
  };
  for (int i = 0; i < dims; ++i) {
    const int d = g.order_[i];
    const uint64_t rest = rest_bytes(d);
    if (rest * static_cast<uint64_t>(g.ext_[d]) <= target_bytes) break;
    if (rest >= target_bytes) {
      g.ext_[d] = 1;
      continue;
    }
    int64_t e = static_cast<int64_t>(target_bytes / rest);
    if (e >= align[d]) e -= e % align[d];
    g.ext_[d] = std::max<int64_t>(e, 1);
    break;
  }
  // Padding of blocked intermediate layouts can push a slot over its limit:
  // shrink the outermost splittable dimension until every slot fits.
  auto slot_need = [&] {
    uint64_t need = 0;
    const Box b = ExtentBox(box, g.ext_);
    for (size_t i = 0; i < layouts.size(); ++i) {
      if (intermediate[i]) need = std::max(need, Total(layouts[i], b, entry));
    }
    return need;
  };
  while (slot_need() > slot_limit) {
    int d = -1;
    for (int i = 0; i < dims && d < 0; ++i) {
      if (g.ext_[g.order_[i]] > 1) d = g.order_[i];
    }
    if (d < 0) {
      return ResourceExhausted("one entry (", entry, " bytes, padded to ", slot_need(),
                               " in an intermediate layout) does not fit a buffer slot of ",
                               slot_limit, " bytes; raise runtime.space_threshold");
    }
    g.ext_[d] = (g.ext_[d] + 1) / 2;
    if (g.ext_[d] > align[d]) g.ext_[d] -= g.ext_[d] % align[d];
  }
  g.count_ = box.empty() ? 0 : 1;
  for (int d = 0; d < dims; ++d) {
    g.tiles_[d] = (box.extent(d) + g.ext_[d] - 1) / g.ext_[d];
    g.count_ *= static_cast<uint64_t>(g.tiles_[d]);
  }
  return g;
}

Box ChunkGrid::chunk(uint64_t k) const {
  Box b;
  b.dims = box_.dims;
  // The innermost dimension of the order varies fastest.
  for (int i = box_.dims - 1; i >= 0; --i) {
    const int d = order_[i];
    const uint64_t t = k % static_cast<uint64_t>(tiles_[d]);
    k /= static_cast<uint64_t>(tiles_[d]);
    b.lo[d] = box_.lo[d] + static_cast<int64_t>(t) * ext_[d];
    b.hi[d] = std::min(b.lo[d] + ext_[d], box_.hi[d]);
  }
  return b;
}

Box ChunkGrid::full_chunk() const { return ExtentBox(box_, ext_); }

uint64_t ChunkGrid::SlotBytes(const Layout& layout, uint64_t field_bytes) const {
  return Total(layout, full_chunk(), field_bytes);
}

Result<ChunkGrid> GridAlong(const Path& path, const Box& box, const FieldSpace& fields,
                            uint64_t target_bytes, uint64_t slot_limit) {
  std::vector<Layout> layouts;
  std::vector<bool> intermediate;
  layouts.reserve(path.nodes.size());  // every copy builds these: no regrowth
  intermediate.reserve(path.nodes.size());
  for (size_t i = 0; i < path.nodes.size(); ++i) {
    layouts.push_back(path.nodes[i].layout);
    intermediate.push_back(i > 0 && i + 1 < path.nodes.size());
  }
  return ChunkGrid::Make(box, fields, layouts, intermediate, target_bytes, slot_limit);
}

}  // namespace isometry
