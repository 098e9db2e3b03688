#include "daemon/runtime/end_costs.h"

#include <algorithm>

#include "procmem/cma_gather.h"

namespace isometry {

bool ReadsProcess(const Path& path, const Topology& topo) {
  // Only a kind that reaches process memory (cma) has an edge from it.
  if (path.edges.empty() || path.nodes.empty()) return false;
  const TopologyMemory* m = topo.FindMemory(path.nodes[0].memory);
  return m && m->kind == MemoryKind::kProcess;
}

void CostEnds(Path& path, const EndForm* src, const EndForm* dst, const Topology& topo) {
  if (!src || !dst) return;  // layout ends: the planner saw what they move
  const size_t hops = path.edges.size();
  if (hops == 0 || path.hop_bps.size() != hops || path.run_bytes.size() != hops) return;
  const uint64_t src_run = std::max<uint64_t>(1, src->bytes / std::max<uint64_t>(1, src->runs));
  const uint64_t dst_run = std::max<uint64_t>(1, dst->bytes / std::max<uint64_t>(1, dst->runs));
  path.run_bytes[0] = std::min(path.run_bytes[0], src_run);
  path.run_bytes[hops - 1] = std::min(path.run_bytes[hops - 1], dst_run);
  path.hop_bps[0] = path.edges[0].tp.At(path.run_bytes[0]);
  path.hop_bps[hops - 1] = path.edges[hops - 1].tp.At(path.run_bytes[hops - 1]);
  const uint64_t chunk = path.request_bytes.empty() ? src->bytes : path.request_bytes[0];
  if (ReadsProcess(path, topo) && CmaGathers(*src, chunk)) {
    // Gathering: the extent at the channel's modelled byte cost.
    const double density = static_cast<double>(src->bytes) / static_cast<double>(src->span);
    path.hop_bps[0] = std::max(path.hop_bps[0], density / (kCmaExtentByteNanos * 1e-9));
  }
  path.predicted_bps = *std::min_element(path.hop_bps.begin(), path.hop_bps.end());
}

bool CmaGathers(const EndForm& src, uint64_t chunk_bytes) {
  if (src.bytes == 0 || chunk_bytes == 0) return false;
  const double chunks = std::max(1.0, static_cast<double>(src.bytes) / chunk_bytes);
  const auto runs = static_cast<uint64_t>(static_cast<double>(src.runs) / chunks);
  const auto extent = static_cast<uint64_t>(static_cast<double>(src.span) / chunks);
  return GatherPays(runs, extent);
}

}  // namespace isometry
