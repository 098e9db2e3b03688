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

void TallyProgram(CopyProgram& p) {
  p.bytes = p.runs = 0;
  for (const CopyOp& op : p.ops) {
    p.bytes += op.bytes();
    p.runs += op.runs();
  }
}

std::vector<CopyProgram> SplitProgram(const CopyProgram& p) {
  std::vector<CopyProgram> out(2);
  if (p.ops.size() >= 2) {
    uint64_t first = 0;
    for (const CopyOp& op : p.ops) {
      CopyProgram& half = first < p.bytes / 2 ? out[0] : out[1];
      half.ops.push_back(op);
      if (&half == &out[0]) first += op.bytes();
    }
  } else if (p.ops.size() == 1 && p.ops[0].num_loops > 0 && p.ops[0].loops[0].count >= 2) {
    // The outermost loop's first half, then its second from where that
    // ends (strides wrap modulo 2^64 like every offset).
    const CopyOp& op = p.ops[0];
    const uint64_t head = op.loops[0].count / 2;
    CopyOp a = op, b = op;
    a.loops[0].count = head;
    b.loops[0].count = op.loops[0].count - head;
    b.src_offset += head * op.loops[0].src_stride;
    b.dst_offset += head * op.loops[0].dst_stride;
    for (CopyOp* half : {&a, &b}) {
      if (half->loops[0].count == 1) {  // canonical: no loop of count 1
        std::copy(half->loops.begin() + 1, half->loops.begin() + half->num_loops,
                  half->loops.begin());
        --half->num_loops;
        half->loops[half->num_loops] = CopyLoop{};
      }
    }
    out[0].ops.push_back(a);
    out[1].ops.push_back(b);
  }
  if (out[0].ops.empty() || out[1].ops.empty()) return {p};
  TallyProgram(out[0]);
  TallyProgram(out[1]);
  return out;
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
