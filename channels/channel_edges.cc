#include "channels/channel_edges.h"

#include <algorithm>
#include <map>
#include <set>

#include "channels/channel_factory.h"
#include "core/strings.h"

namespace isometry {
namespace {

bool Serves(const ChannelBackend* b, MemoryKind src, MemoryKind dst) {
  return b && b->serves && b->serves(src, dst);
}

// The configured memory pairs `b` serves by default.
std::vector<std::pair<std::string, std::string>> DefaultEdges(const RuntimeConfig& config,
                                                              const ChannelBackend* b) {
  std::vector<std::pair<std::string, std::string>> edges;
  for (const MemoryConfig& a : config.memories) {
    for (const MemoryConfig& z : config.memories) {
      const bool devices_ok = !b || !b->within_one_device || a.device == z.device;
      if (devices_ok && Serves(b, a.kind, z.kind)) edges.emplace_back(a.name, z.name);
    }
  }
  return edges;
}

// The edges the file gives `c`, of kind `b` (written, or its kind's
// default), PROCESS memory aside: what CheckChannelKinds judges.
std::vector<std::pair<std::string, std::string>> ConfiguredEdges(const RuntimeConfig& config,
                                                                 const ChannelConfig& c,
                                                                 const ChannelBackend* b) {
  if (!c.edges.empty()) return c.edges;
  if (b && b->reaches_process_memory) return {};
  return DefaultEdges(config, b);
}

// What `c`'s kind `b` allows of its written settings: a kind made per
// peer is never written, a kind that reaches PROCESS memory takes no
// edges, and a kind that cannot be capped takes no rate_limit.
Status CheckKindSettings(const ChannelConfig& c, const ChannelBackend& b, const std::string& key) {
  if (b.per_peer) {
    return ConfigKeyError(key + ".kind", "channel '", c.name, "' has kind ", b.name, "; ", b.name,
                          " channels are made per [[peer]], not written");
  }
  if (b.reaches_process_memory && !c.edges.empty()) {
    return ConfigKeyError(key + ".edges", "channel '", c.name, "' (", b.name,
                          ") takes no edges: it serves every client's registered memory to and "
                          "from every host memory");
  }
  if (!b.takes_rate_limit && c.rate_limit_bytes_per_s) {
    return ConfigKeyError(key + ".rate_limit", "channel '", c.name, "' (", b.name,
                          ") takes no rate_limit");
  }
  return OkStatus();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> ChannelEdges(const RuntimeConfig& config,
                                                              const ChannelConfig& c) {
  std::vector<std::pair<std::string, std::string>> edges;
  std::set<std::string> process;  // the PROCESS memory the runtime added, if any
  for (const MemoryConfig& m : config.memories) {
    if (m.kind == MemoryKind::kProcess) process.insert(m.name);
  }
  const ChannelBackend* b = FindBackend(c.kind);
  if (!b || !b->reaches_process_memory) {
    for (auto& e : ConfiguredEdges(config, c, b)) {
      if (!process.count(e.first) && !process.count(e.second)) edges.push_back(e);
    }
    return edges;
  }
  for (const std::string& p : process) {
    for (const MemoryConfig& m : config.memories) {
      if (!IsHostMemory(m.kind) || process.count(m.name)) continue;
      edges.emplace_back(p, m.name);
      edges.emplace_back(m.name, p);
    }
  }
  return edges;
}

bool ReachesProcessMemory(const RuntimeConfig& config) {
  return std::any_of(config.channels.begin(), config.channels.end(), [](const ChannelConfig& c) {
    const ChannelBackend* b = FindBackend(c.kind);
    return b && b->reaches_process_memory;
  });
}

Status CheckChannelKinds(const RuntimeConfig& config) {
  std::map<std::string, MemoryKind> kinds;
  for (const MemoryConfig& m : config.memories) kinds.emplace(m.name, m.kind);
  std::set<std::pair<std::string, std::string>> served;
  for (size_t i = 0; i < config.channels.size(); ++i) {
    const ChannelConfig& c = config.channels[i];
    if (!c.peer.empty()) continue;  // made per peer (PeerChannels), between no configured memories
    const ChannelBackend* b = FindBackend(c.kind);
    const std::string key = StrCat("channel[", i, "]");
    if (b) ISO_RETURN_IF_ERROR(CheckKindSettings(c, *b, key));
    const auto edges = ConfiguredEdges(config, c, b);
    for (size_t e = 0; e < edges.size(); ++e) {
      const auto& [src, dst] = edges[e];
      // Written edges point at their line; default ones at the kind.
      const std::string edge_key = c.edges.empty() ? key + ".kind" : StrCat(key, ".edges[", e, "]");
      const auto s = kinds.find(src), d = kinds.find(dst);
      if (s == kinds.end() || d == kinds.end()) {
        return ConfigKeyError(edge_key, "channel '", c.name, "' names unknown memory '",
                              s == kinds.end() ? src : dst, "'");
      }
      if (!Serves(b, s->second, d->second)) {
        return ConfigKeyError(edge_key, "channel '", c.name, "' (",
                              b ? std::string_view(b->name) : ChannelKindName(c.kind),
                              ") cannot serve ", src, " -> ", dst);
      }
      if (!served.insert({src, dst}).second) {
        return ConfigKeyError(edge_key, "channel '", c.name, "' serves ", src, " -> ", dst,
                              ", which another channel already serves");
      }
    }
  }
  return OkStatus();
}

}  // namespace isometry
