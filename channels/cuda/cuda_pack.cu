#include "channels/cuda/cuda_pack.h"

namespace isometry::cuda {
namespace {

constexpr unsigned kThreads = 256;
constexpr uint64_t kMaxBlocks = 16384;

template <typename Word>
__device__ void CopyWords(uint64_t src, uint64_t dst, uint64_t bytes) {
  const auto* in = reinterpret_cast<const Word*>(src);
  auto* out = reinterpret_cast<Word*>(dst);
  for (uint64_t i = 0; i < bytes / sizeof(Word); ++i) out[i] = in[i];
}

__global__ void PackKernel(const PackOp* ops, uint32_t num_ops, uint64_t runs, uint64_t src,
                           uint64_t dst) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t run = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; run < runs;
       run += stride) {
    const PackRun r = PackRunAt(ops, num_ops, run);
    const uint64_t s = src + r.src_offset;
    const uint64_t d = dst + r.dst_offset;
    // The widest word that the run's two ends and its length are all
    // aligned to: 16-byte vectors for wide aligned runs, 4-byte words for
    // the narrow fields of arrays of structs, bytes otherwise.
    const uint64_t align = s | d | r.bytes;
    if ((align & 15) == 0) {
      CopyWords<uint4>(s, d, r.bytes);
    } else if ((align & 7) == 0) {
      CopyWords<uint64_t>(s, d, r.bytes);
    } else if ((align & 3) == 0) {
      CopyWords<uint32_t>(s, d, r.bytes);
    } else {
      CopyWords<unsigned char>(s, d, r.bytes);
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
