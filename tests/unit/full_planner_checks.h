// What the full planner tests share: §4.2's constraints checked on a
// returned path with the core layout algebra (independently of the
// planner's own model code), the model's figure for a path, and short names.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "planner/full_planner.h"
#include "planner/planner.h"
#include "planner/testing/synthetic_graphs.h"

namespace isometry::testing {

using Kind = LayoutComponent::Kind;

constexpr uint64_t kMiB = uint64_t{1} << 20;

// `a` with each whole dimension that `b` splits read as b's split (the
// refinement of full_planner.h, written again on core layouts).
inline Layout RefineAgainst(const Layout& a, const Layout& b) {
  std::vector<LayoutComponent> out;
  for (const LayoutComponent& c : a.components()) {
    if (c.kind == Kind::kDim && b.block_of(c.dim) > 0) {
      out.push_back({Kind::kDimIn, c.dim, b.block_of(c.dim)});
      out.push_back({Kind::kDimOut, c.dim, 0});
    } else {
      out.push_back(c);
    }
  }
  return *Layout::Make(std::move(out), a.dims());
}

inline uint64_t RefinedPrefix(const Layout& a, const Layout& b, const Box& bounds, uint64_t fb) {
  return Prefix(RefineAgainst(a, b), RefineAgainst(b, a), bounds, fb);
}

inline uint64_t RefinedSuffixBar(const Layout& a, const Layout& b, const Box& bounds, uint64_t fb) {
  return SuffixBar(RefineAgainst(a, b), RefineAgainst(b, a), bounds, fb);
}

// Checks every constraint of §4.2 on a returned path; "" or what failed.
inline std::string CheckConstraints(const Topology& topo, const Path& p, const PlanEndpoint& src,
                                    const PlanEndpoint& dst, const Box& bounds, uint64_t fb,
                                    uint64_t th) {
  const size_t hops = p.edges.size();
  if (p.nodes.size() != hops + 1 || hops == 0) return "malformed path";
  if (!(p.nodes.front() == PathNode{src.memory, src.layout})) return "does not start at the source";
  if (!(p.nodes.back() == PathNode{dst.memory, dst.layout})) {
    return "does not end at the destination";
  }
  // Acyclic: a memory appears once, or twice in a row (one self-loop); a
  // copy within one memory may also end where it started.
  std::set<MemoryId> seen;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const MemoryId m = p.nodes[i].memory;
    const bool repeat = i > 0 && p.nodes[i - 1].memory == m;
    const bool closes = i + 1 == p.nodes.size() && src.memory == dst.memory;
    if (repeat && i > 1 && p.nodes[i - 2].memory == m) return "two self-loops in a row";
    if (!repeat && !closes && !seen.insert(m).second) return "a memory appears twice";
  }
  if (p.predicted_bps <= 0) return "no predicted throughput";
  for (size_t h = 0; h < hops; ++h) {
    const PathNode& a = p.nodes[h];
    const PathNode& b = p.nodes[h + 1];
    const TopologyEdge* e = topo.FindEdge(a.memory, b.memory);
    if (!e) return StrCat("connectivity: no channel at hop ", h);
    if (!(p.edges[h].src == a.memory) || !(p.edges[h].dst == b.memory) ||
        p.edges[h].channel != e->channel) {
      return StrCat("hop ", h, " carries the wrong channel");
    }
    // Throughput: TP <= tp(m_i, m_i+1, PREFIX(l_i, l_i+1)).
    const uint64_t prefix = RefinedPrefix(a.layout, b.layout, bounds, fb);
    if (p.predicted_bps > e->tp.At(prefix) * (1 + 1e-12)) {
      return StrCat("throughput: hop ", h, " reaches ", e->tp.At(prefix), " B/s with PREFIX ",
                    prefix, " but the path claims ", p.predicted_bps);
    }
    // Space: SUFFIX̄ <= TH between two intermediate buffers.
    if (h > 0 && h + 1 < hops && RefinedSuffixBar(a.layout, b.layout, bounds, fb) > th) {
      return StrCat("space: hop ", h, " shuffles ",
                    RefinedSuffixBar(a.layout, b.layout, bounds, fb), " > ", th);
    }
  }
  if (p.request_bytes.size() != hops || p.hop_bps.size() != hops ||
      p.buffer_bytes.size() != hops - 1) {
    return "estimates missing";
  }
  for (uint64_t b : p.buffer_bytes) {
    if (b > th || b == 0) return StrCat("buffer of ", b, " bytes, threshold ", th);
  }
  return "";
}

inline double ModelBps(const Topology& topo, const Path& p, const Box& bounds, uint64_t fb,
                       const FullPlannerOptions& o = {}) {
  Result<Path> e = EvaluatePath(topo, p, bounds, fb, o);
  return e.ok() ? e->predicted_bps : 0;
}

inline bool Converts(const Path& p, size_t hop) {
  return !(p.nodes[hop].layout == p.nodes[hop + 1].layout);
}

inline MemoryId Mem(uint32_t node, PaperMemory m) { return PaperMemoryId(node, m); }

}  // namespace isometry::testing
