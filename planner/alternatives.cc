#include "planner/alternatives.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "planner/path_evaluation.h"

namespace isometry {

namespace {

// Memory sequences src -> dst, shortest first (iterative deepening), each a
// simple path staging only in host or GPU memories of the ends' nodes.
class Candidates {
 public:
  Candidates(const Topology& topo, MemoryId src, MemoryId dst) : topo_(topo), src_(src), dst_(dst) {
    if (src == dst && topo.FindEdge(src, dst)) found_.push_back({src, dst});
    for (int hops = 1; hops <= kAlternativeHops && !Full(); ++hops) {
      std::vector<MemoryId> seq{src};
      Extend(seq, hops);
    }
  }
  std::vector<std::vector<MemoryId>> Take() && { return std::move(found_); }

 private:
  bool Full() const { return found_.size() >= kAlternativeCandidates; }

  bool MayStage(MemoryId m) const {
    if (m.node != src_.node && m.node != dst_.node) return false;
    const TopologyMemory* mem = topo_.FindMemory(m);
    return mem && mem->kind != MemoryKind::kDsk && mem->kind != MemoryKind::kProcess;
  }

  // Adds every sequence of exactly `hops` hops that continues `seq`.
  void Extend(std::vector<MemoryId>& seq, int hops) {
    const MemoryId at = seq.back();
    for (const TopologyEdge& e : topo_.edges) {
      if (Full()) return;
      if (e.src != at || e.src == e.dst) continue;
      const int left = hops - static_cast<int>(seq.size());  // hops after this one
      if (e.dst == dst_) {
        if (left == 0) {
          seq.push_back(e.dst);
          found_.push_back(seq);
          seq.pop_back();
        }
        continue;
      }
      if (left == 0 || !MayStage(e.dst) || e.dst == src_ ||
          std::find(seq.begin(), seq.end(), e.dst) != seq.end()) {
        continue;
      }
      seq.push_back(e.dst);
      Extend(seq, hops);
      seq.pop_back();
    }
  }

  const Topology& topo_;
  const MemoryId src_, dst_;
  std::vector<std::vector<MemoryId>> found_;
};

std::vector<MemoryId> MemoriesOf(const Path& p) {
  std::vector<MemoryId> out;
  for (const PathNode& n : p.nodes) out.push_back(n.memory);
  return out;
}

// The memories and channels of a candidate no layouts could be placed on.
Path Bare(const Topology& topo, const std::vector<MemoryId>& seq, const Path& chosen) {
  Path p;
  for (size_t i = 0; i < seq.size(); ++i) {
    const Layout& l = i + 1 < seq.size() ? chosen.nodes.front().layout : chosen.nodes.back().layout;
    p.nodes.push_back({seq[i], l});
    if (i > 0) p.edges.push_back(*topo.FindEdge(seq[i - 1], seq[i]));
  }
  return p;
}

// Why the planner did not take `a` (evaluated) over `chosen`.
std::string Verdict(const Planner& planner, const Path& a, const Path& chosen) {
  const std::string rates =
      chosen.predicted_bps > 0
          ? absl::StrFormat("predicted %s against the chosen path's %s", RateText(a.predicted_bps),
                            RateText(chosen.predicted_bps))
          : absl::StrFormat("predicted %s", RateText(a.predicted_bps));
  const std::string limit = PathLimit(a, planner.topology());
  if (chosen.algorithm == "explicit") {
    return absl::StrCat("not weighed: the copy named its path (via); ", rates, ", ", limit);
  }
  if (chosen.algorithm == "simple") {
    if (a.edges.size() > chosen.edges.size()) {
      return absl::StrFormat(
          "not weighed: a copy under the full planner's threshold (%d bytes) takes the fewest "
          "hops (simple algorithm), and this one has %d; %s, %s",
          planner.options().full_threshold, a.edges.size(), rates, limit);
    }
    return absl::StrCat(
        "not weighed: the simple algorithm takes the first path of the fewest hops ", "it finds; ",
        rates, ", ", limit);
  }
  const double margin = FullPlannerOptions{}.improve_margin;
  if (a.predicted_bps < chosen.predicted_bps * (1 - margin)) {
    return absl::StrCat("slower: ", rates, ", ", limit);
  }
  if (a.edges.size() > chosen.edges.size()) {
    return absl::StrCat("as fast within the planner's margin but longer (the shorter path wins): ",
                        rates);
  }
  return absl::StrCat("as fast within the planner's margin (the search kept the path it found ",
                      "first; layouts may differ): ", rates);
}

bool Faster(const PlanAlternative& x, const PlanAlternative& y) {
  return x.path.predicted_bps > y.path.predicted_bps;
}

}  // namespace

std::string RateText(double bytes_per_s) { return absl::StrFormat("%.2f GB/s", bytes_per_s / 1e9); }

std::string PathLimit(const Path& path, const Topology& topo) {
  if (path.predicted_bps <= 0 || path.hop_bps.size() != path.edges.size() || path.edges.empty()) {
    return "";
  }
  const size_t slow = static_cast<size_t>(
      std::min_element(path.hop_bps.begin(), path.hop_bps.end()) - path.hop_bps.begin());
  const auto hop_text = [&](size_t h) {
    const TopologyEdge& e = path.edges[h];
    return absl::StrFormat("hop %d (%s -[%s]-> %s)", h, topo.NameOf(e.src), e.channel_name,
                           topo.NameOf(e.dst));
  };
  const std::string hop = hop_text(slow) + " at " + RateText(path.hop_bps[slow]);
  if (path.predicted_bps < path.hop_bps[slow] * 0.999) {
    return absl::StrCat("limited by what its Memcpy hops share (a channel's threads, the node's ",
                        "memory; slowest hop: ", hop, ")");
  }
  std::vector<const TopologyEdge*> edges;
  for (const TopologyEdge& e : path.edges) edges.push_back(&e);
  for (const auto& [a, b] : full_planner_internal::PipedPairs(path.hop_bps, edges)) {
    if (a == slow || b == slow) {
      return absl::StrCat("limited by what two pipelined Memcpy hops move through their ring: ",
                          hop_text(a), " and ", hop_text(b), " at ", RateText(path.hop_bps[slow]));
    }
  }
  return absl::StrCat("limited by ", hop);
}

Alternatives WeighAlternatives(const Planner& planner, const AlternativesRequest& req) {
  const Topology& topo = planner.topology();
  const Path& chosen = *req.chosen;
  Alternatives out;
  PlanAlternative first{chosen, true, PathLimit(chosen, topo)};
  if (first.verdict.empty()) first.verdict = "not evaluated by the model";
  out.paths.push_back(std::move(first));
  if (chosen.nodes.size() < 2) return out;
  const PlanEndpoint src{chosen.nodes.front().memory, chosen.nodes.front().layout};
  const PlanEndpoint dst{chosen.nodes.back().memory, chosen.nodes.back().layout};
  std::set<std::vector<MemoryId>> seen{MemoriesOf(chosen)};
  std::vector<PlanAlternative> weighed, rejected;
  const std::vector<std::vector<MemoryId>> candidates =
      Candidates(topo, src.memory, dst.memory).Take();
  for (const std::vector<MemoryId>& seq : candidates) {
    std::vector<const TopologyEdge*> edges;
    for (size_t i = 1; i < seq.size(); ++i) edges.push_back(topo.FindEdge(seq[i - 1], seq[i]));
    Result<Path> placed =
        PlaceConversion(topo, src, dst, edges, [&topo](MemoryId m) { return topo.FindEdge(m, m); });
    if (!placed.ok()) {
      if (!seen.insert(seq).second) continue;
      rejected.push_back({Bare(topo, seq, chosen), false, std::string(placed.status().message())});
      continue;
    }
    if (!seen.insert(MemoriesOf(*placed)).second) continue;
    ++out.weighed;
    Result<Path> eval =
        planner.Evaluate(*placed, req.bounds, req.field_bytes, req.element_bytes, req.durable);
    if (!eval.ok()) {
      rejected.push_back({*std::move(placed), false,
                          absl::StrCat("ruled out by the model: ", eval.status().message())});
      continue;
    }
    if (req.adjust) req.adjust(*eval);
    PlanAlternative alt{*std::move(eval), false, ""};
    alt.verdict = Verdict(planner, alt.path, chosen);
    weighed.push_back(std::move(alt));
  }
  std::stable_sort(weighed.begin(), weighed.end(), Faster);
  for (auto* list : {&weighed, &rejected}) {
    for (PlanAlternative& a : *list) {
      if (out.paths.size() > req.limit) break;
      out.paths.push_back(std::move(a));
    }
  }
  return out;
}

}  // namespace isometry
