// Copy programs (layout/copy_program.h) lowered to the operations a CUDA
// stream runs: contiguous runs as cudaMemcpyAsync, one constant-stride loop
// as cudaMemcpy2DAsync, two loops as cudaMemcpy3DAsync where the outer
// stride is a whole number of inner pitches (else a loop of 2-D copies),
// and everything else as ops of the generic pack kernel (cuda_pack.cu).
//
// Pure host code with no CUDA calls or headers: the channel issues what
// this returns, and tests/unit/cuda_lowering_test.cc checks, without a GPU,
// that executing the operations on the host gives the bytes of layout's
// CPU executor. Thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <vector>

#include "channels/cuda/cuda_pack_op.h"
#include "layout/copy_program.h"

namespace isometry::cuda {

enum class CudaCopyKind { kMemcpy, kMemcpy2D, kMemcpy3D };

// One copy engine operation, offsets relative to the request's endpoints.
//  kMemcpy:   `width` bytes.
//  kMemcpy2D: `height` rows of `width` bytes, rows `src_pitch`/`dst_pitch`
//             apart (cudaMemcpy2DAsync).
//  kMemcpy3D: `depth` slices of such rows, slices `src_rows * src_pitch`
//             (`dst_rows * dst_pitch`) apart (cudaMemcpy3DAsync with
//             pitched pointers of ysize src_rows/dst_rows).
// Pitches are at least `width` and at most LoweringLimits::max_pitch; rows
// at least `height`.
struct CudaCopy {
  CudaCopyKind kind = CudaCopyKind::kMemcpy;
  uint64_t src_offset = 0;
  uint64_t dst_offset = 0;
  uint64_t width = 0;
  uint64_t height = 1;
  uint64_t depth = 1;
  uint64_t src_pitch = 0;
  uint64_t dst_pitch = 0;
  uint64_t src_rows = 0;
  uint64_t dst_rows = 0;
  bool operator==(const CudaCopy&) const = default;
};

struct LoweringLimits {
  // Both ends are device-addressable (device memory, or host memory mapped
  // into the device), so the pack kernel may run the request. Without it
  // (pageable host memory on one side) what the copy engines cannot
  // express is split into 2-D copies, or single runs, instead.
  bool kernel_allowed = true;
  // The copy engines' largest pitch (cudaDevAttrMaxPitch; 2^31 - 1 on every
  // GPU we know of).
  uint64_t max_pitch = (uint64_t{1} << 31) - 1;
  // A two-loop op that is not one 3-D copy becomes this many 2-D copies at
  // most; beyond, the kernel (when allowed) is cheaper than the API calls.
  uint64_t max_2d_loop = 64;
  // Strided runs narrower than this go to the pack kernel where it is
  // allowed: the copy engines move a row of a 2-D copy at a time, so rows
  // of a few bytes (the fields of an array of structs) crawl through them
  // (Jenkins et al.: 10-20x slower than a kernel at 8-byte blocks; on an
  // H200, 4-byte fields of an array of structs: 35 GB/s by 2-D copies,
  // 266-353 by the kernel). 0: the engines take any width they can express.
  uint64_t narrow_run_bytes = 64;
};

struct CudaLowering {
  std::vector<CudaCopy> copies;  // any order: their destinations are disjoint
  std::vector<PackOp> kernel_ops;
  uint64_t kernel_runs = 0;  // threads of the pack kernel (one per run)
};

CudaLowering LowerProgram(const CopyProgram& program, const LoweringLimits& limits = {});

// The PackOp of `op` (first_run 0): also how tests emulate the kernel.
PackOp ToPackOp(const CopyOp& op);

}  // namespace isometry::cuda
