#include "channels/cuda/cuda_memory.h"

#include <cuda_runtime_api.h>

#include "channels/cuda/cuda_stream.h"
#include "core/strings.h"

namespace isometry::cuda {
namespace {

class CudaMemory final : public GpuMemory {
 public:
  explicit CudaMemory(int devices) : devices_(devices) {}

  Result<uint64_t> AllocateDevice(int device, uint64_t bytes) override {
    ISO_RETURN_IF_ERROR(Select(device));
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky; clear it for the next call
      return ResourceExhausted("GPU ", device, ": cudaMalloc of ", bytes,
                               " bytes: out of device memory");
    }
    ISO_RETURN_IF_ERROR(CudaStatus(err, StrCat("GPU ", device), "cudaMalloc"));
    return reinterpret_cast<uint64_t>(p);
  }

  void FreeDevice(int device, uint64_t address) override {
    if (!Select(device).ok()) return;
    // NOLINTNEXTLINE(performance-no-int-to-ptr): device addresses travel as integers
    (void)cudaFree(reinterpret_cast<void*>(address));
  }

  Status PinHost(void* base, uint64_t bytes) override {
    return CudaStatus(
        cudaHostRegister(base, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped), "ZCM",
        "cudaHostRegister");
  }

  void UnpinHost(void* base) override { (void)cudaHostUnregister(base); }

 private:
  Status Select(int device) const {
    if (device < 0 || device >= devices_) {
      return InvalidArgument("GPU ", device, " does not exist (", devices_, " GPU(s))");
    }
    return CudaStatus(cudaSetDevice(device), StrCat("GPU ", device), "cudaSetDevice");
  }

  const int devices_;  // constant after construction
};

}  // namespace

Result<std::unique_ptr<GpuMemory>> MakeCudaMemory(const GpuProbe& probe) {
  if (probe.gpus.empty()) return FailedPrecondition(probe.error);
  return std::unique_ptr<GpuMemory>(new CudaMemory(static_cast<int>(probe.gpus.size())));
}

}  // namespace isometry::cuda
