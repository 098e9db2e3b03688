// The generic pack kernel (cuda_pack.cu): one thread per contiguous run of
// a table of PackOps (cuda_pack_op.h), each thread copying its run byte
// by byte, or 8 bytes at a time when both ends and the length allow.
// Simple on purpose; the fast datatype kernels are another piece of work.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "channels/cuda/cuda_pack_op.h"

namespace isometry::cuda {

// Enqueues the kernel on `stream` (whose device holds `ops`): copies every
// run of the `num_ops` ops in `ops` (device memory), `runs` in all, from
// `src` + run offset to `dst` + run offset. Both ends must be addressable
// from the stream's device. Returns the launch's error.
cudaError_t LaunchPack(const PackOp* ops, uint32_t num_ops, uint64_t runs, uint64_t src,
                       uint64_t dst, cudaStream_t stream);

}  // namespace isometry::cuda
