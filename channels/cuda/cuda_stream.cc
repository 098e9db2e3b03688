#include "channels/cuda/cuda_stream.h"

#include <utility>

namespace isometry::cuda {

Status CudaStatus(cudaError_t err, std::string_view channel, std::string_view what) {
  if (err == cudaSuccess) return OkStatus();
  return Internal(channel, ": ", what, ": ", cudaGetErrorString(err));
}

Result<CudaStream> CudaStream::Create(int device, std::string_view channel) {
  ISO_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device), channel, "cudaSetDevice"));
  CudaStream s;
  ISO_RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&s.stream_, cudaStreamNonBlocking),
                                 channel, "cudaStreamCreateWithFlags"));
  s.device_ = device;
  return s;
}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    Reset();
    stream_ = std::exchange(other.stream_, nullptr);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

void CudaStream::Reset() {
  if (!stream_) return;
  // Errors here have no one to go to: the stream's work is done (the
  // channel drains before it is destroyed).
  (void)cudaSetDevice(device_);
  (void)cudaStreamDestroy(stream_);
  stream_ = nullptr;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

Status DeviceBuffer::Grow(int device, size_t bytes, std::string_view channel) {
  if (ptr_ && bytes_ >= bytes) return OkStatus();
  Reset();
  size_t size = 4096;
  while (size < bytes) size *= 2;
  ISO_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&ptr_, size), channel, "cudaMalloc"));
  bytes_ = size;
  device_ = device;
  return OkStatus();
}

void DeviceBuffer::Reset() {
  if (!ptr_) return;
  int current = 0;
  (void)cudaGetDevice(&current);
  (void)cudaSetDevice(device_);
  (void)cudaFree(ptr_);
  (void)cudaSetDevice(current);
  ptr_ = nullptr;
  bytes_ = 0;
}

}  // namespace isometry::cuda
