// Copy ops written out in tests of the layout engine's programs.
#pragma once

#include <cstdint>
#include <vector>

#include "layout/copy_program.h"

namespace isometry::testing {

// One op: a run of `run` bytes at src/dst, repeated over `loops`
// (outermost first).
inline CopyOp Strided(uint64_t src, uint64_t dst, uint64_t run, std::vector<CopyLoop> loops) {
  CopyOp op;
  op.src_offset = src;
  op.dst_offset = dst;
  op.run_bytes = run;
  op.num_loops = static_cast<int>(loops.size());
  for (size_t i = 0; i < loops.size(); ++i) op.loops[i] = loops[i];
  return op;
}

}  // namespace isometry::testing
