// The device encoding of copy ops for the generic pack kernel
// (cuda_pack.cu), shared by the kernel and the host code that builds and
// emulates it. Plain C++ (no standard library beyond <cstdint>) so nvcc and
// the host compiler see the same layout and the same index arithmetic.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define ISOMETRY_HOST_DEVICE __host__ __device__
#else
#define ISOMETRY_HOST_DEVICE
#endif

namespace isometry::cuda {

inline constexpr int kMaxPackLoops = 12;  // layout/copy_program.h's kMaxCopyLoops

struct PackLoop {
  uint64_t count;
  uint64_t src_stride;  // two's complement, as in CopyLoop
  uint64_t dst_stride;
};

// One CopyOp, plus where its runs start in the table's run numbering.
struct PackOp {
  uint64_t src_offset;
  uint64_t dst_offset;
  uint64_t run_bytes;
  uint64_t first_run;  // runs of the ops before this one
  uint32_t num_loops;
  uint32_t unused;
  PackLoop loops[kMaxPackLoops];  // outermost first
};

struct PackRun {
  uint64_t src_offset;
  uint64_t dst_offset;
  uint64_t bytes;
};

// Run number `run` of a table of `num_ops` ops (0 <= run < total runs):
// the op by binary search over first_run, then the loop indices innermost
// first (one thread of the kernel computes exactly this).
ISOMETRY_HOST_DEVICE inline PackRun PackRunAt(const PackOp* ops, uint32_t num_ops, uint64_t run) {
  uint32_t lo = 0;
  uint32_t hi = num_ops;
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (ops[mid].first_run <= run) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const PackOp& op = ops[lo];
  uint64_t index = run - op.first_run;
  PackRun out{op.src_offset, op.dst_offset, op.run_bytes};
  for (int l = static_cast<int>(op.num_loops) - 1; l >= 0; --l) {
    const PackLoop& loop = op.loops[l];
    uint64_t i = 0;
    // 32-bit division where both fit: a GPU divides 64-bit integers in
    // software, several times slower, and every thread divides per loop.
    if (((index | loop.count) >> 32) == 0) {
      const auto narrow = static_cast<uint32_t>(index);
      const auto count = static_cast<uint32_t>(loop.count);
      i = narrow % count;
      index = narrow / count;
    } else {
      i = index % loop.count;
      index /= loop.count;
    }
    out.src_offset += i * loop.src_stride;
    out.dst_offset += i * loop.dst_stride;
  }
  return out;
}

}  // namespace isometry::cuda
