#include "channels/cuda/cuda_lowering.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace isometry::cuda {
namespace {

bool Negative(uint64_t stride) { return static_cast<int64_t>(stride) < 0; }

// An op whose loops all step forward on both sides: a loop that steps
// backwards on both is walked from its far end instead (the same bytes,
// since destinations are disjoint). A loop backwards on one side only
// stays as it is, and nothing below but the kernel or single runs takes it.
CopyOp Forward(CopyOp op) {
  for (int l = 0; l < op.num_loops; ++l) {
    CopyLoop& loop = op.loops[l];
    if (Negative(loop.src_stride) && Negative(loop.dst_stride)) {
      op.src_offset += (loop.count - 1) * loop.src_stride;
      op.dst_offset += (loop.count - 1) * loop.dst_stride;
      loop.src_stride = 0 - loop.src_stride;
      loop.dst_stride = 0 - loop.dst_stride;
    }
  }
  return op;
}

bool Pitchable(uint64_t pitch, uint64_t width, const LoweringLimits& limits) {
  return !Negative(pitch) && pitch >= width && pitch <= limits.max_pitch;
}

// The innermost loop as the rows of a 2-D copy.
bool Rows(const CopyOp& op, const LoweringLimits& limits) {
  const CopyLoop& inner = op.loops[op.num_loops - 1];
  return Pitchable(inner.src_stride, op.run_bytes, limits) &&
         Pitchable(inner.dst_stride, op.run_bytes, limits);
}

CudaCopy Copy2D(const CopyOp& op, uint64_t src_offset, uint64_t dst_offset) {
  const CopyLoop& inner = op.loops[op.num_loops - 1];
  return {.kind = CudaCopyKind::kMemcpy2D,
          .src_offset = src_offset,
          .dst_offset = dst_offset,
          .width = op.run_bytes,
          .height = inner.count,
          .src_pitch = inner.src_stride,
          .dst_pitch = inner.dst_stride};
}

// Slices `outer` of rows `inner` in one 3-D copy: each slice stride a whole
// number of pitches, at least `inner.count` of them.
bool Slices(uint64_t outer, uint64_t inner, uint64_t count, uint64_t& rows) {
  if (Negative(outer) || inner == 0 || outer % inner != 0) return false;
  rows = outer / inner;
  return rows >= count;
}

// Calls f(src_offset, dst_offset) at every index of the loops [0, end).
template <typename F>
void ForEachIndex(const CopyOp& op, int end, F&& f) {
  std::array<uint64_t, kMaxCopyLoops> index{};
  while (true) {
    uint64_t s = op.src_offset;
    uint64_t d = op.dst_offset;
    for (int l = 0; l < end; ++l) {
      s += index[l] * op.loops[l].src_stride;
      d += index[l] * op.loops[l].dst_stride;
    }
    f(s, d);
    int l = end - 1;
    while (l >= 0 && ++index[l] == op.loops[l].count) {
      index[l] = 0;
      --l;
    }
    if (l < 0) return;
  }
}

// Without the kernel: 2-D copies over the outer loops, or single runs.
void Split(const CopyOp& op, const LoweringLimits& limits, CudaLowering& out) {
  if (Rows(op, limits)) {
    ForEachIndex(op, op.num_loops - 1,
                 [&](uint64_t s, uint64_t d) { out.copies.push_back(Copy2D(op, s, d)); });
    return;
  }
  ForEachIndex(op, op.num_loops, [&](uint64_t s, uint64_t d) {
    out.copies.push_back(
        {.kind = CudaCopyKind::kMemcpy, .src_offset = s, .dst_offset = d, .width = op.run_bytes});
  });
}

void ToKernel(const CopyOp& op, CudaLowering& out) {
  PackOp p = ToPackOp(op);
  p.first_run = out.kernel_runs;
  out.kernel_runs += op.runs();
  out.kernel_ops.push_back(p);
}

// Two loops: one 3-D copy, a few 2-D ones, or (when it is allowed and
// there are many) the kernel.
bool TryTwoLoops(const CopyOp& op, const LoweringLimits& limits, CudaLowering& out) {
  if (!Rows(op, limits)) return false;
  const CopyLoop& outer = op.loops[0];
  const CopyLoop& inner = op.loops[1];
  uint64_t src_rows = 0;
  uint64_t dst_rows = 0;
  if (Slices(outer.src_stride, inner.src_stride, inner.count, src_rows) &&
      Slices(outer.dst_stride, inner.dst_stride, inner.count, dst_rows)) {
    CudaCopy c = Copy2D(op, op.src_offset, op.dst_offset);
    c.kind = CudaCopyKind::kMemcpy3D;
    c.depth = outer.count;
    c.src_rows = src_rows;
    c.dst_rows = dst_rows;
    out.copies.push_back(c);
    return true;
  }
  if (limits.kernel_allowed && outer.count > limits.max_2d_loop) return false;
  Split(op, limits, out);
  return true;
}

void LowerOp(const CopyOp& original, const LoweringLimits& limits, CudaLowering& out) {
  if (original.run_bytes == 0 || original.runs() == 0) return;
  const CopyOp op = Forward(original);
  if (op.num_loops == 0) {
    out.copies.push_back({.kind = CudaCopyKind::kMemcpy,
                          .src_offset = op.src_offset,
                          .dst_offset = op.dst_offset,
                          .width = op.run_bytes});
    return;
  }
  if (limits.kernel_allowed && op.run_bytes < limits.narrow_run_bytes) {
    ToKernel(original, out);
    return;
  }
  if (op.num_loops == 1 && Rows(op, limits)) {
    out.copies.push_back(Copy2D(op, op.src_offset, op.dst_offset));
    return;
  }
  if (op.num_loops == 2 && TryTwoLoops(op, limits, out)) return;
  if (limits.kernel_allowed) {
    ToKernel(original, out);
  } else {
    Split(op, limits, out);
  }
}

}  // namespace

PackOp ToPackOp(const CopyOp& op) {
  PackOp p{};
  p.src_offset = op.src_offset;
  p.dst_offset = op.dst_offset;
  p.run_bytes = op.run_bytes;
  p.num_loops = static_cast<uint32_t>(op.num_loops);
  for (int l = 0; l < op.num_loops && l < kMaxPackLoops; ++l) {
    p.loops[l] = {op.loops[l].count, op.loops[l].src_stride, op.loops[l].dst_stride};
  }
  return p;
}

CudaLowering LowerProgram(const CopyProgram& program, const LoweringLimits& limits) {
  static_assert(kMaxPackLoops == kMaxCopyLoops);
  CudaLowering out;
  for (const CopyOp& op : program.ops) LowerOp(op, limits, out);
  return out;
}

}  // namespace isometry::cuda
