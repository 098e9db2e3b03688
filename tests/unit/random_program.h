// Random copy programs for tests of the layout engine's programs.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <vector>

#include "layout/copy_program.h"
#include "layout/hop_window.h"
#include "unit/copy_ops.h"

namespace isometry::testing {

// A random program over buffers of `*src_bytes` and `*dst_bytes`: ops of
// 0-3 loops, strides of either sign, each op shifted so that it starts at
// offset 0 or later on both sides.
inline CopyProgram RandomProgram(std::mt19937_64& rng, uint64_t* src_bytes, uint64_t* dst_bytes) {
  CopyProgram p;
  const auto pick = [&](uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
  };
  uint64_t src_end = 0, dst_end = 0;
  const uint64_t ops = pick(1, 6);
  for (uint64_t i = 0; i < ops; ++i) {
    std::vector<CopyLoop> loops(pick(0, 3));
    const uint64_t run = pick(1, 3) == 1 ? pick(1, 9) : pick(1, 700);
    for (CopyLoop& l : loops) {
      l.count = pick(2, 7);
      const auto stride = [&] {
        const int64_t s = static_cast<int64_t>(pick(0, 3000)) - 1000;
        return static_cast<uint64_t>(s);
      };
      l.src_stride = stride();
      l.dst_stride = stride();
    }
    CopyOp op = Strided(0, 0, run, loops);
    CopyProgram one;
    one.ops.push_back(op);
    const auto s = hop_window::SideSpan(one, true);
    const auto d = hop_window::SideSpan(one, false);
    REQUIRE(s);
    REQUIRE(d);
    op.src_offset = src_end + static_cast<uint64_t>(-s->lo);
    op.dst_offset = dst_end + static_cast<uint64_t>(-d->lo);
    src_end += static_cast<uint64_t>(s->hi - s->lo) + pick(0, 64);
    dst_end += static_cast<uint64_t>(d->hi - d->lo);
    p.ops.push_back(op);
  }
  TallyProgram(p);
  *src_bytes = src_end;
  *dst_bytes = dst_end;
  return p;
}

}  // namespace isometry::testing
