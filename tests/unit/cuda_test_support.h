// Shared by the CUDA tests: random copies of the layout family the compiler
// tests use, and a host emulation of lowered CUDA operations.
#pragma once

#include <cstring>
#include <random>

#include "channels/cuda/cuda_lowering.h"
#include "layout/compiler.h"
#include "unit/test_util.h"

namespace isometry::testing {

struct RandomCopy {
  InstanceShape src;
  InstanceShape dst;
  Box box;
};

// 1-4 dimensions, mixed field sizes, blocked and whole dimensions, a
// destination index space larger than the box, sub-boxes.
inline RandomCopy MakeRandomCopy(std::mt19937_64& rng, int dims, bool sub_box) {
  const int64_t max_extent = dims <= 2 ? 17 : (dims == 3 ? 7 : 5);
  const Box bounds = RandomBounds(rng, dims, max_extent);
  const FieldSpace fields = RandomFields(rng);
  RandomCopy c{{bounds, fields, RandomLayout(rng, bounds)}, {}, bounds};
  Box dbounds = bounds;
  for (int d = 0; d < dims; ++d) dbounds.hi[d] += static_cast<int64_t>(rng() % 3);
  c.dst = {dbounds, fields, RandomLayout(rng, dbounds)};
  if (sub_box) c.box = RandomSubBox(rng, bounds);
  return c;
}

// What the copy engines and the pack kernel would do, on host memory.
inline void EmulateCopy(const cuda::CudaCopy& c, const std::byte* src, std::byte* dst) {
  for (uint64_t z = 0; z < c.depth; ++z) {
    for (uint64_t y = 0; y < c.height; ++y) {
      const uint64_t s = c.src_offset + z * c.src_rows * c.src_pitch + y * c.src_pitch;
      const uint64_t d = c.dst_offset + z * c.dst_rows * c.dst_pitch + y * c.dst_pitch;
      std::memcpy(dst + d, src + s, c.width);
    }
  }
}

inline void EmulateLowering(const cuda::CudaLowering& l, const std::byte* src, std::byte* dst) {
  for (const cuda::CudaCopy& c : l.copies) EmulateCopy(c, src, dst);
  const auto n = static_cast<uint32_t>(l.kernel_ops.size());
  for (uint64_t run = 0; run < l.kernel_runs; ++run) {
    const cuda::PackRun r = cuda::PackRunAt(l.kernel_ops.data(), n, run);
    std::memcpy(dst + r.dst_offset, src + r.src_offset, r.bytes);
  }
}

}  // namespace isometry::testing
