// Synthetic transfer graphs for tests and benchmarks: the paper's fig. 4
// (one GPU and one disk per node) with the channel bandwidths of its table 5
// (Sapling cluster), for two nodes or any number of them.
//
// Every node n has five memories, ids {n, PaperMemory}: SYS, REG, ZCM, FBM,
// DSK, named "sys<n>", "reg<n>", ... Edges, per node (table 5):
//   Memcpy     among ZCM/REG/SYS, self-loops included       7740 MB/s, flat
//   GPUWrite   ZCM -> FBM 5941, REG/SYS -> FBM 5139          2 us per request
//   GPURead    FBM -> ZCM 6418, FBM -> REG/SYS 4502          2 us per request
//   GPUCopy    FBM -> FBM (self-loop)                        55366 MB/s, 2 us
//   DiskWrite  ZCM/REG/SYS -> DSK 270, DiskRead the reverse 280, 100 us
// and between every ordered pair of nodes (a full mesh):
//   RemoteMemcpy  REG -> ZCM*/REG*/SYS* 3180, ZCM/SYS -> ZCM*/REG*/SYS* 2701,
//                 10 us per request
// Memcpy is flat, as the paper's fig. 5d shows ("performs consistently
// regardless of the request sizes"); the others pay a fixed cost per request
// (ThroughputFunction::PerRequestOverhead), the shape of fig. 5b. The
// overheads are our choice: the paper gives only the curves' shapes.
// MB is 10^6 bytes.
#pragma once

#include <cstdint>

#include "planner/topology.h"

namespace isometry {

enum class PaperMemory : uint32_t { kSys = 0, kReg = 1, kZcm = 2, kFbm = 3, kDsk = 4 };

inline MemoryId PaperMemoryId(uint32_t node, PaperMemory m) {
  return {node, static_cast<uint32_t>(m)};
}

// Table 5, bytes per second.
inline constexpr double kTable5Memcpy = 7740e6;
inline constexpr double kTable5GpuWriteZcm = 5941e6;
inline constexpr double kTable5GpuWriteHost = 5139e6;
inline constexpr double kTable5GpuReadZcm = 6418e6;
inline constexpr double kTable5GpuReadHost = 4502e6;
inline constexpr double kTable5GpuCopy = 55366e6;
inline constexpr double kTable5DiskWrite = 270e6;
inline constexpr double kTable5DiskRead = 280e6;
inline constexpr double kTable5NetFromReg = 3180e6;
inline constexpr double kTable5NetFromHost = 2701e6;

// Per-request costs of the synthetic throughput functions, seconds.
inline constexpr double kSyntheticGpuOverhead = 2e-6;
inline constexpr double kSyntheticDiskOverhead = 100e-6;
inline constexpr double kSyntheticNetOverhead = 10e-6;

// Fig. 4 with table 5 for `nodes` nodes (>= 1); channel indices are the edge
// indices.
Topology PaperGraph(uint32_t nodes = 2);

// The traits an edge of `kind` carries, as the channels' descriptors give
// them (channels/ may not be seen from here; channel_factory_test checks
// that the two agree for every kind): tests that build graphs by hand use
// it too.
EdgeTraits PaperTraits(ChannelKind kind);

}  // namespace isometry
