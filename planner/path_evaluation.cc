#include "planner/path_evaluation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "planner/shape_algebra.h"

namespace isometry {
namespace full_planner_internal {

const ThroughputFunction& CurveOf(const TopologyEdge& e, bool contiguous) {
  return contiguous && e.tp_contiguous ? *e.tp_contiguous : e.tp;
}

double HopThroughput(const TopologyEdge& e, uint64_t run, bool contiguous, uint64_t field_bytes,
                     const ThroughputFunction*& curve) {
  curve = &CurveOf(e, contiguous);
  if (curve != &e.tp) return curve->At(run);
  if (e.max_request_bytes > 0) run = std::min(run, e.max_request_bytes);
  const double two = e.tp.At(run);
  if (!e.tp_fields8 || run == 0 || run >= field_bytes || run > kFields8MaxRun) return two;
  // How many runs of this size a point's fields make: 2 reads `tp`, 8 and
  // more the 8-field curve, in between linear in log2.
  const double fan = static_cast<double>(field_bytes) / static_cast<double>(run);
  const double t = std::clamp((std::log2(fan) - 1) / 2, 0.0, 1.0);
  return two + (e.tp_fields8->At(run) - two) * t;
}

namespace {

// An uncapped hop between two memories of one node that crosses its
// memory (a Memcpy hop): the hops SHARED and the pipe are about.
bool SharesNodeMemory(const TopologyEdge& e, double hop_bps) {
  return e.traits.shares_node_memory && e.rate_limit_bytes_per_s <= 0 && e.src.node == e.dst.node &&
         hop_bps > 0;
}

}  // namespace

std::vector<std::pair<size_t, size_t>> PipedPairs(const std::vector<double>& hop_bps,
                                                  const std::vector<const TopologyEdge*>& edges) {
  if (edges.size() < 2) return {};  // most paths: nothing to group
  std::map<uint32_t, std::vector<size_t>> per_node;
  for (size_t h = 0; h < edges.size(); ++h) {
    if (SharesNodeMemory(*edges[h], hop_bps[h])) per_node[edges[h]->src.node].push_back(h);
  }
  std::vector<std::pair<size_t, size_t>> pairs;
  for (const auto& [node, hops] : per_node) {
    if (hops.size() != 2) continue;
    const TopologyEdge &a = *edges[hops[0]], &b = *edges[hops[1]];
    if (a.channel != b.channel && std::max(a.node_pipe_bps, b.node_pipe_bps) > 0) {
      pairs.emplace_back(hops[0], hops[1]);
    }
  }
  return pairs;
}

std::vector<double> PipedHopRates(const std::vector<double>& hop_bps,
                                  const std::vector<uint64_t>& run_bytes,
                                  const std::vector<const TopologyEdge*>& edges) {
  std::vector<double> out = hop_bps;
  for (const auto& [a, b] : PipedPairs(hop_bps, edges)) {
    const double pipe = std::max(edges[a]->node_pipe_bps, edges[b]->node_pipe_bps);
    // The pipe was measured with plain copies: a hop that changes the
    // layout runs slower than that by as much as its own curve says.
    double scale = 1;
    for (size_t h : {a, b}) {
      const double plain = CurveOf(*edges[h], /*contiguous=*/true).At(run_bytes[h]);
      if (plain > 0) scale = std::min(scale, hop_bps[h] / plain);
    }
    out[a] = out[b] = pipe * scale;
  }
  return out;
}

double SharedMemoryBound(const std::vector<double>& hop_bps,
                         const std::vector<const TopologyEdge*>& edges) {
  // Per node, the path's uncapped Memcpy hops: seconds per byte in all and
  // per channel, how many, and the node's parallel copy rate.
  struct NodeHops {
    double seconds = 0;
    std::map<int, double> channel_seconds;
    int count = 0;
    double node_copy_bps = 0;
    double node_pipe_bps = 0;
  };
  std::map<uint32_t, NodeHops> per_node;
  for (size_t h = 0; h < edges.size(); ++h) {
    const TopologyEdge& e = *edges[h];
    if (!SharesNodeMemory(e, hop_bps[h])) continue;
    NodeHops& n = per_node[e.src.node];
    n.seconds += 1 / hop_bps[h];
    n.channel_seconds[e.channel] += 1 / hop_bps[h];
    ++n.count;
    n.node_copy_bps = std::max(n.node_copy_bps, e.node_copy_bps);
    n.node_pipe_bps = std::max(n.node_pipe_bps, e.node_pipe_bps);
  }
  double bound = std::numeric_limits<double>::infinity();
  for (const auto& [node, n] : per_node) {
    if (n.count < 2) continue;
    // Hops of one channel share its threads: their times add up.
    for (const auto& [channel, seconds] : n.channel_seconds) bound = std::min(bound, 1 / seconds);
    // Two of them pipelined through the runtime's ring: the ring stays in
    // the cache and each byte crosses memory about once; what such a pair
    // moves is measured (node_pipe_bps).
    if (n.count == 2 && n.node_pipe_bps > 0) {
      bound = std::min(bound, n.node_pipe_bps);
      continue;
    }
    // More of them share the node's memory: each byte crosses it once per
    // hop. Unmeasured, the hops are taken to run one after the other.
    bound = std::min(bound, n.node_copy_bps > 0 ? n.node_copy_bps / n.count : 1 / n.seconds);
  }
  return bound;
}

Result<Path> Evaluate(Path path, const std::vector<const TopologyEdge*>& edges, const Box& bounds,
                      uint64_t field_bytes, const FullPlannerOptions& o, uint64_t element_bytes) {
  const size_t hops = edges.size();
  const uint64_t th = o.space_threshold;
  std::vector<Shape> shapes;
  for (const PathNode& n : path.nodes) {
    shapes.push_back(ShapeOf(n.layout));
  }
  std::vector<uint64_t> prefix(hops), sbar(hops), cap(hops);
  std::vector<const ThroughputFunction*> curves(hops);
  const uint64_t total = Product(shapes[0], 0, shapes[0].n, bounds, field_bytes);
  path.hop_bps.assign(hops, 0);
  for (size_t h = 0; h < hops; ++h) {
    const PairShape p = AnalyzePair(shapes[h], shapes[h + 1]);
    prefix[h] = PrefixBytes(p, bounds, field_bytes, element_bytes);
    sbar[h] = Product(p.ra, 0, p.sb, bounds, field_bytes);
    const bool from_inner = h > 0, to_inner = h + 1 < hops;
    if (from_inner && to_inner && sbar[h] > th) {
      return FailedPrecondition("space: hop ", h, " (", path.nodes[h].layout.ToString(), " -> ",
                                path.nodes[h + 1].layout.ToString(), ") shuffles ", sbar[h],
                                " bytes between two intermediate buffers; the threshold is ", th);
    }
    cap[h] = from_inner || to_inner ? std::min(prefix[h], th) : prefix[h];
    path.hop_bps[h] = HopThroughput(*edges[h], cap[h], prefix[h] >= total, field_bytes, curves[h]);
    path.edges[h] = *edges[h];
  }
  // A pipelined pair's hops move what the pair moved through the ring,
  // above either hop's own curve (PipedHopRates).
  path.hop_bps = PipedHopRates(path.hop_bps, cap, edges);
  double tp = std::numeric_limits<double>::infinity();
  for (double bps : path.hop_bps) tp = std::min(tp, bps);
  tp = std::min(tp, SharedMemoryBound(path.hop_bps, edges));
  path.predicted_bps = tp;
  path.run_bytes = cap;
  path.request_bytes.assign(hops, 0);
  for (size_t h = 0; h < hops; ++h) {
    uint64_t r = curves[h]->MinRequestFor(tp).value_or(cap[h]);
    path.request_bytes[h] = std::min(std::max(r, o.min_request_bytes), cap[h]);
  }
  path.buffer_bytes.assign(hops - 1, 0);
  for (size_t k = 0; k + 1 < hops; ++k) {  // the buffer at nodes[k + 1]
    uint64_t b = std::max(path.request_bytes[k], path.request_bytes[k + 1]);
    if (k >= 1) {
      b = std::max(b, sbar[k]);  // hop k joins two intermediates
    }
    if (k + 2 < hops) {
      b = std::max(b, sbar[k + 1]);  // so does hop k + 1
    }
    const Shape& s = shapes[k + 1];
    path.buffer_bytes[k] = std::min(b, Product(s, 0, s.n, bounds, field_bytes));
  }
  return path;
}

Status ValidateRequest(const Box& bounds, uint64_t field_bytes) {
  ISO_RETURN_IF_ERROR(bounds.Validate("index space"));
  if (bounds.empty()) {
    return InvalidArgument("index space ", ToString(bounds), " is empty");
  }
  if (field_bytes == 0) {
    return InvalidArgument("the entry size |F| is 0 bytes");
  }
  return OkStatus();
}

Status ValidateLayout(const Layout& l, const Box& bounds, std::string_view what) {
  if (l.dims() != bounds.dims) {
    return InvalidArgument(what, " layout '", l.ToString(), "' has ", l.dims(),
                           " dimension(s); the index space has ", bounds.dims);
  }
  return OkStatus();
}

}  // namespace full_planner_internal

Result<Path> EvaluatePath(const Topology& topo, Path path, const Box& bounds, uint64_t field_bytes,
                          const FullPlannerOptions& options, uint64_t element_bytes) {
  return full_planner_internal::EvaluateWith(
      [&topo](MemoryId a, MemoryId b) { return topo.FindEdge(a, b); }, std::move(path), bounds,
      field_bytes, options, element_bytes);
}

}  // namespace isometry
