// GPU memories in the configuration ([gpu] in the file, FBM [[memory]]
// entries, gpu_* [[channel]] entries) and how they meet the machine.
//
// Parsing and Validate are pure. What the machine has comes from the GPU
// probe (channels/channel_factory.h, DetectGpus) as a GpuInventory; the
// two meet in the GPU kinds' ResolveGpus (channels/added_channels.h),
// which the daemon's start check and its start both run, so
// `isometryd --check-config` refuses what a start would.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace isometry {

// [gpu]: the memories and channels the daemon adds per detected GPU.
struct GpuConfig {
  // "auto": where a GPU is detected and no FBM memory is configured, one
  // FBM memory per device (gpu0, gpu1, ...) and the GPU channels not
  // configured (gpu_write0, gpu_read0, gpu_copy0) are added. "off": only
  // what the file lists.
  bool auto_memories = true;
  uint64_t staging_bytes = 256ull << 20;  // staging budget of each added FBM memory
  // The channels' settings (request size and streams per GPU). 16 MiB:
  // on an H200 host<->device copies in 4 MiB requests moved 0.93x of one
  // cudaMemcpy, in 16 MiB ones 0.97-0.98x (per-request stream work).
  uint64_t request_bytes = 16ull << 20;
  int max_in_flight = 4;

  Status Validate() const;
};

// What the GPU probe found, in the config's terms. Empty `memory_bytes`:
// no GPU (or a build without CUDA), `why_none` says why.
struct GpuInventory {
  std::vector<uint64_t> memory_bytes;          // per CUDA device number
  std::vector<std::vector<bool>> peer_access;  // [a][b]: a reaches b's memory
  std::string why_none;
};

}  // namespace isometry
