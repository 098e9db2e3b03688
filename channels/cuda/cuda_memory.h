// GpuMemory (channels/gpu_memory.h) over the CUDA runtime: cudaMalloc /
// cudaFree on the named device, cudaHostRegister (portable, mapped) /
// cudaHostUnregister. Reached through the channel factory only.
#pragma once

#include <memory>

#include "channels/cuda/cuda_probe.h"
#include "channels/gpu_memory.h"

namespace isometry::cuda {

// The GPUs of `probe`; an error ("no GPU: ...") when it found none.
Result<std::unique_ptr<GpuMemory>> MakeCudaMemory(const GpuProbe& probe);

}  // namespace isometry::cuda
