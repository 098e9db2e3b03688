#include "layout/program_span.h"

#include <algorithm>

namespace isometry {

uint64_t ProgramSpan(const CopyProgram& p, bool dst) {
  uint64_t end = 0;
  for (const CopyOp& op : p.ops) {
    uint64_t last = dst ? op.dst_offset : op.src_offset;
    for (int i = 0; i < op.num_loops; ++i) {
      const CopyLoop& l = op.loops[static_cast<size_t>(i)];
      last += (l.count - 1) * (dst ? l.dst_stride : l.src_stride);
    }
    end = std::max(end, last + op.run_bytes);
  }
  return end;
}

}  // namespace isometry
