#include "layout/copy_program.h"

#include <algorithm>
#include <cstddef>
#include <utility>

namespace isometry {

uint64_t CopyOp::runs() const {
  uint64_t n = 1;
  for (int i = 0; i < num_loops; ++i) {
    n *= loops[i].count;
  }
  return n;
}

uint64_t CopyOp::bytes() const { return runs() * run_bytes; }

std::shared_ptr<const CopyProgram> ContiguousProgram(uint64_t bytes) {
  auto p = std::make_shared<CopyProgram>();
  CopyOp op;
  op.run_bytes = bytes;
  p->ops.push_back(op);
  p->bytes = bytes;
  p->runs = 1;
  return p;
}

void FoldLoops(std::vector<CopyLoop> loops, CopyOp& op) {
  bool changed = true;
  while (changed) {
    changed = false;
    if (!loops.empty() && loops.back().src_stride == op.run_bytes &&
        loops.back().dst_stride == op.run_bytes) {
      op.run_bytes *= loops.back().count;
      loops.pop_back();
      changed = true;
      continue;
    }
    for (size_t i = 1; i < loops.size(); ++i) {
      const CopyLoop inner = loops[i];
      CopyLoop& outer = loops[i - 1];
      if (outer.src_stride == inner.count * inner.src_stride &&
          outer.dst_stride == inner.count * inner.dst_stride) {
        outer = {outer.count * inner.count, inner.src_stride, inner.dst_stride};
        loops.erase(loops.begin() + static_cast<ptrdiff_t>(i));
        changed = true;
        break;
      }
    }
  }
  op.num_loops = static_cast<int>(loops.size());
  std::copy(loops.begin(), loops.end(), op.loops.begin());
}

}  // namespace isometry
