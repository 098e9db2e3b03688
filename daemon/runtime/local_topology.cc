#include "daemon/runtime/local_topology.h"

#include <map>

#include "channels/channel_edges.h"
#include "channels/channel_factory.h"
#include "daemon/runtime/runtime.h"

namespace isometry {
namespace {

ThroughputFunction FunctionOf(const RateModel& m) {
  if (m.peak_bytes_per_s <= 0) return ThroughputFunction();
  return ThroughputFunction::PerRequestOverhead(m.peak_bytes_per_s, m.per_request_seconds);
}

// The model of an edge from `src` to `dst` memory (see the header).
void Model(TopologyEdge& e, MemoryKind src, MemoryKind dst) {
  const ChannelBackend* b = FindBackend(e.kind);
  if (!b || !b->model) {
    e.tp = ThroughputFunction();
    return;
  }
  const EdgeRateModel m = b->model(src, dst);
  e.tp = FunctionOf(m.runs);
  if (m.contiguous) e.tp_contiguous = FunctionOf(*m.contiguous);
}

}  // namespace

Topology LocalTopology(const RuntimeConfig& config) {
  Topology topo;
  std::map<std::string, std::pair<MemoryId, MemoryKind>> ids;
  for (size_t i = 0; i < config.memories.size(); ++i) {
    const MemoryConfig& m = config.memories[i];
    const MemoryId id{config.node, static_cast<uint32_t>(i)};
    topo.memories.push_back({id, m.kind, m.name});
    ids[m.name] = {id, m.kind};
  }
  for (size_t c = 0; c < config.channels.size(); ++c) {
    const ChannelConfig& cc = config.channels[c];
    for (const auto& [s, d] : ChannelEdges(config, cc)) {
      const auto src = ids.find(s), dst = ids.find(d);
      if (src == ids.end() || dst == ids.end()) continue;  // PROCESS memory not added
      TopologyEdge e{src->second.first, dst->second.first, static_cast<int>(c), cc.kind, cc.name};
      e.rate_limit_bytes_per_s = static_cast<double>(cc.rate_limit_bytes_per_s);
      e.max_request_bytes = cc.request_bytes;
      e.traits = EdgeTraitsOf(cc.kind);
      Model(e, src->second.second, dst->second.second);
      topo.edges.push_back(std::move(e));
    }
  }
  return topo;
}

}  // namespace isometry
