// What the GPU runtime tests share (gpu_runtime_test on a GPU,
// gpu_emulated_test with a host-backed stand-in): a host buffer of a
// pattern that remembers what it held, and random layouts whose blocks
// are small enough that an entry of a chunk fits a slot under a small TH.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "daemon/runtime/runtime.h"
#include "unit/test_util.h"

namespace isometry::testing {

struct GpuTestBuf {
  InstanceShape shape;
  std::vector<std::byte> bytes, before;
  GpuTestBuf(InstanceShape s, uint64_t seed) : shape(std::move(s)) {
    bytes = Pattern(shape.total_bytes(), seed);
    before = bytes;
  }
  InstanceRef Ref(MemoryId m) { return {m, bytes.data(), bytes.size(), shape}; }
};

inline Layout SmallBlocks(std::mt19937_64& rng, const Box& bounds) {
  Layout l = RandomLayout(rng, bounds);
  auto comps = l.components();
  for (auto& c : comps) {
    if (c.kind == LayoutComponent::Kind::kDimIn) c.block = 1 + c.block % 4;
  }
  return *Layout::Make(comps, bounds.dims);
}

}  // namespace isometry::testing
