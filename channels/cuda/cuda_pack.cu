#include "channels/cuda/cuda_pack.h"

namespace isometry::cuda {
namespace {

constexpr unsigned kThreads = 256;
constexpr uint64_t kMaxBlocks = 16384;

__global__ void PackKernel(const PackOp* ops, uint32_t num_ops, uint64_t runs, uint64_t src,
                           uint64_t dst) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t run = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; run < runs;
       run += stride) {
    const PackRun r = PackRunAt(ops, num_ops, run);
    const uint64_t s = src + r.src_offset;
    const uint64_t d = dst + r.dst_offset;
    if (((s | d | r.bytes) & 7) == 0) {
      const auto* in = reinterpret_cast<const uint64_t*>(s);
      auto* out = reinterpret_cast<uint64_t*>(d);
      for (uint64_t i = 0; i < r.bytes / 8; ++i) out[i] = in[i];
    } else {
      const auto* in = reinterpret_cast<const unsigned char*>(s);
      auto* out = reinterpret_cast<unsigned char*>(d);
      for (uint64_t i = 0; i < r.bytes; ++i) out[i] = in[i];
    }
  }
}

}  // namespace

cudaError_t LaunchPack(const PackOp* ops, uint32_t num_ops, uint64_t runs, uint64_t src,
                       uint64_t dst, cudaStream_t stream) {
  if (runs == 0 || num_ops == 0) return cudaSuccess;
  uint64_t blocks = (runs + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  PackKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(ops, num_ops, runs, src, dst);
  return cudaGetLastError();
}

}  // namespace isometry::cuda
