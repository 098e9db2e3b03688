// Memory the GPU channels reach, as the runtime needs it: device memory
// for FBM staging rings, and host memory pinned and mapped for the GPUs
// (ZCM). The CUDA implementation lives in channels/cuda/ (cuda_memory.cc)
// and is reached only through the channel factory (GpuMemoryOfMachine,
// channel_factory.h), so the runtime builds without CUDA.
//
// Thread-safe: any call from any thread. Nothing here owns what it hands
// out beyond the call: the caller frees each allocation (FreeDevice) and
// unpins each pinned range (UnpinHost) exactly once, before the object
// goes.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace isometry {

class GpuMemory {
 public:
  virtual ~GpuMemory() = default;

  // `bytes` of device memory on `device` (the CUDA device number), as a
  // device address (DeviceBytes::address). RESOURCE_EXHAUSTED when the
  // device is full; INTERNAL with CUDA's words otherwise.
  virtual Result<uint64_t> AllocateDevice(int device, uint64_t bytes) = 0;
  virtual void FreeDevice(int device, uint64_t address) = 0;

  // Pins [base, base + bytes) and maps it into every GPU's address space
  // (ZCM), so GPU copies from and to it run asynchronously and kernels
  // may address it. INTERNAL with CUDA's words when refused (RLIMIT_MEMLOCK
  // does not apply to CUDA's pinning; an unaligned or already pinned range
  // may be refused).
  virtual Status PinHost(void* base, uint64_t bytes) = 0;
  virtual void UnpinHost(void* base) = 0;
};

}  // namespace isometry
