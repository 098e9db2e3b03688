// Move-only owners of the CUDA handles the GPU channels hold, and CUDA
// errors as Status. Host code against the runtime API (cuda_runtime_api.h
// only: no kernels here).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string_view>

#include "core/status.h"

namespace isometry::cuda {

// OK for cudaSuccess; otherwise INTERNAL naming the channel, what failed
// and CUDA's words for it ("gpu_write 'gpuw': cudaMemcpy2DAsync: invalid
// pitch argument").
Status CudaStatus(cudaError_t err, std::string_view channel, std::string_view what);

// A non-blocking stream on one device; destroyed on that device.
class CudaStream {
 public:
  static Result<CudaStream> Create(int device, std::string_view channel);
  CudaStream() = default;
  CudaStream(CudaStream&& other) noexcept { *this = std::move(other); }
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  ~CudaStream() { Reset(); }

  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }

 private:
  void Reset();
  cudaStream_t stream_ = nullptr;
  int device_ = -1;
};

// Device memory that only grows (the pack kernel's op tables); freed on its
// device. Grow() waits for the device when it replaces a smaller buffer
// (cudaFree synchronizes), so callers grow rarely: sizes round up.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Reset(); }

  // At least `bytes` on `device` (the current device of the caller).
  Status Grow(int device, size_t bytes, std::string_view channel);
  void* get() const { return ptr_; }

 private:
  void Reset();
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  int device_ = -1;
};

}  // namespace isometry::cuda
