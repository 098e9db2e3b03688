// The hand-written baseline of gpu_bench's AOS->SOA row (gpu_baselines.h):
// one thread per struct, a grid-stride loop, each thread reading its
// struct's fields (neighbouring threads read neighbouring structs) and
// writing one value to each array (neighbouring threads write neighbouring
// values, so every store is coalesced).
#include <cuda_runtime.h>

#include "tools/bench/gpu_baselines.h"

namespace isometry::bench {
namespace {

__global__ void TransposeKernel(const uint32_t* src, uint32_t* dst, uint64_t elements, int fields) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < elements;
       i += stride) {
    const uint32_t* in = src + i * static_cast<uint64_t>(fields);
    for (int f = 0; f < fields; ++f) dst[static_cast<uint64_t>(f) * elements + i] = in[f];
  }
}

}  // namespace

int TransposeAosToSoa4(const void* src, void* dst, uint64_t elements, int fields) {
  int device = 0;
  int sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const unsigned threads = 256;
  const uint64_t wanted = (elements + threads - 1) / threads;
  const uint64_t most = static_cast<uint64_t>(sms > 0 ? sms : 1) * 32;
  const auto blocks = static_cast<unsigned>(wanted < most ? (wanted > 0 ? wanted : 1) : most);
  TransposeKernel<<<blocks, threads>>>(static_cast<const uint32_t*>(src),
                                       static_cast<uint32_t*>(dst), elements, fields);
  const cudaError_t launched = cudaGetLastError();
  if (launched != cudaSuccess) return static_cast<int>(launched);
  return static_cast<int>(cudaDeviceSynchronize());
}

}  // namespace isometry::bench
