// What CUDA sees on this machine: the GPUs, where they sit (PCI bus,
// NUMA node) and which pairs can reach each other's memory. Asked once at
// start by the channel factory, which logs Summary() and offers the GPU
// channels only when gpus is non-empty.
//
// Never fails: without a driver, without a device, or with a driver older
// than the runtime linked in, gpus is empty and `error` holds CUDA's own
// words ("no GPU: CUDA driver version is insufficient for CUDA runtime
// version"). Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace isometry::cuda {

struct GpuInfo {
  int index = 0;              // the CUDA runtime's device number
  std::string name;           // "NVIDIA H100 80GB HBM3"
  uint64_t total_memory = 0;  // bytes
  std::string pci_bus_id;     // "0000:3b:00.0" (lower case, as in sysfs)
  int numa_node = -1;         // from sysfs; -1: unknown or none
  uint64_t max_pitch = 0;     // cudaDevAttrMaxPitch
};

struct GpuProbe {
  std::vector<GpuInfo> gpus;
  // peer_access[a][b]: device a can access device b's memory (a != b).
  std::vector<std::vector<bool>> peer_access;
  std::string error;  // "no GPU: ..." when gpus is empty

  // One line: "2 GPUs: gpu0 NVIDIA H100 (79.1 GiB, PCI 0000:3b:00.0, NUMA
  // 0), ...; P2P: gpu0<->gpu1" or `error`.
  std::string Summary() const;
};

// Queries the CUDA runtime (and sysfs for NUMA nodes).
GpuProbe ProbeGpus();

// The probe of this process, taken at its first call (CUDA's device list
// is fixed once the runtime starts, so every later probe would say the same).
const GpuProbe& CachedGpuProbe();

// "/sys/bus/pci/devices/0000:3b:00.0/numa_node" for CUDA's "00000000:3B:00.0"
// or "0000:3B:00.0".
std::string SysfsNumaPath(std::string_view cuda_bus_id);

}  // namespace isometry::cuda
