#include "planner/testing/synthetic_graphs.h"

namespace isometry {

EdgeTraits PaperTraits(ChannelKind kind) {
  EdgeTraits t;
  t.simple_converter = t.shares_node_memory = kind == ChannelKind::kMemcpy;
  t.converts_layout = kind != ChannelKind::kDiskRead && kind != ChannelKind::kDiskWrite;
  t.tp_is_per_run = kind == ChannelKind::kCma;
  t.crosses_nodes = kind == ChannelKind::kRemoteMemcpy;
  return t;
}

Topology PaperGraph(uint32_t nodes) {
  using M = PaperMemory;
  Topology t;
  const ThroughputFunction memcpy = ThroughputFunction::Constant(kTable5Memcpy);
  auto gpu = [](double peak) {
    return ThroughputFunction::PerRequestOverhead(peak, kSyntheticGpuOverhead);
  };
  const ThroughputFunction gpu_write_zcm = gpu(kTable5GpuWriteZcm);
  const ThroughputFunction gpu_write_host = gpu(kTable5GpuWriteHost);
  const ThroughputFunction gpu_read_zcm = gpu(kTable5GpuReadZcm);
  const ThroughputFunction gpu_read_host = gpu(kTable5GpuReadHost);
  const ThroughputFunction gpu_copy = gpu(kTable5GpuCopy);
  const ThroughputFunction disk_write =
      ThroughputFunction::PerRequestOverhead(kTable5DiskWrite, kSyntheticDiskOverhead);
  const ThroughputFunction disk_read =
      ThroughputFunction::PerRequestOverhead(kTable5DiskRead, kSyntheticDiskOverhead);
  const ThroughputFunction net_reg =
      ThroughputFunction::PerRequestOverhead(kTable5NetFromReg, kSyntheticNetOverhead);
  const ThroughputFunction net_host =
      ThroughputFunction::PerRequestOverhead(kTable5NetFromHost, kSyntheticNetOverhead);

  for (uint32_t n = 0; n < nodes; ++n) {
    t.memories.push_back({PaperMemoryId(n, M::kSys), MemoryKind::kSys, StrCat("sys", n)});
    t.memories.push_back({PaperMemoryId(n, M::kReg), MemoryKind::kReg, StrCat("reg", n)});
    t.memories.push_back({PaperMemoryId(n, M::kZcm), MemoryKind::kZcm, StrCat("zcm", n)});
    t.memories.push_back({PaperMemoryId(n, M::kFbm), MemoryKind::kFbm, StrCat("fbm", n)});
    t.memories.push_back({PaperMemoryId(n, M::kDsk), MemoryKind::kDsk, StrCat("dsk", n)});
  }
  auto edge = [&t](MemoryId a, MemoryId b, ChannelKind kind, std::string name,
                   const ThroughputFunction& tp) {
    t.edges.push_back({a, b, static_cast<int>(t.edges.size()), kind, std::move(name), tp});
    t.edges.back().traits = PaperTraits(kind);
  };
  const M host[] = {M::kZcm, M::kReg, M::kSys};
  for (uint32_t n = 0; n < nodes; ++n) {
    const auto id = [n](M m) { return PaperMemoryId(n, m); };
    for (M a : host) {
      for (M b : host) {
        edge(id(a), id(b), ChannelKind::kMemcpy, StrCat("memcpy", n), memcpy);
      }
    }
    edge(id(M::kZcm), id(M::kFbm), ChannelKind::kGpuWrite, StrCat("gpuwrite", n), gpu_write_zcm);
    edge(id(M::kReg), id(M::kFbm), ChannelKind::kGpuWrite, StrCat("gpuwrite", n), gpu_write_host);
    edge(id(M::kSys), id(M::kFbm), ChannelKind::kGpuWrite, StrCat("gpuwrite", n), gpu_write_host);
    edge(id(M::kFbm), id(M::kZcm), ChannelKind::kGpuRead, StrCat("gpuread", n), gpu_read_zcm);
    edge(id(M::kFbm), id(M::kReg), ChannelKind::kGpuRead, StrCat("gpuread", n), gpu_read_host);
    edge(id(M::kFbm), id(M::kSys), ChannelKind::kGpuRead, StrCat("gpuread", n), gpu_read_host);
    edge(id(M::kFbm), id(M::kFbm), ChannelKind::kGpuCopy, StrCat("gpucopy", n), gpu_copy);
    for (M a : host) {
      edge(id(a), id(M::kDsk), ChannelKind::kDiskWrite, StrCat("diskwrite", n), disk_write);
      edge(id(M::kDsk), id(a), ChannelKind::kDiskRead, StrCat("diskread", n), disk_read);
    }
  }
  for (uint32_t a = 0; a < nodes; ++a) {
    for (uint32_t b = 0; b < nodes; ++b) {
      if (a == b) {
        continue;
      }
      for (M from : host) {
        for (M to : host) {
          edge(PaperMemoryId(a, from), PaperMemoryId(b, to), ChannelKind::kRemoteMemcpy,
               StrCat("net", a, "-", b), from == M::kReg ? net_reg : net_host);
        }
      }
    }
  }
  return t;
}

}  // namespace isometry
