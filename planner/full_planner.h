// The full path planning algorithm (Isometry §4.2) and the cost model it
// optimizes.
//
// The model. A path <(m_0,l_0), ..., (m_{n+1},l_{n+1})> has one hop per
// pair of neighbours. For hop i:
//   PREFIX_i  = the longest common prefix of l_i and l_{i+1}, in bytes: the
//               largest request the hop can issue. Without F in it, its
//               atoms count points and each point is one field's value:
//               PREFIX_i = points x the smallest field's size (element
//               bytes), so AOS -> SOA of 4-byte fields is a 4-byte run;
//               the channel's throughput function is of run bytes (how
//               converting channels are calibrated);
//   SUFFIX̄_i = TOTAL / the longest common suffix: the data one hop shuffles,
//               a lower bound on buffers when both ends are intermediate.
// Layouts are compared after *refinement*: when one layout keeps dimension x
// whole and the other splits it into x_in=c, x_out, the whole x is read as
// x_in=c, x_out (the same linearization when c divides |x|; near enough
// otherwise). This is how the paper's table 3 compares <F,x,y> with
// <F,x_in,y_in,x_out,y_out>; core/layout.h's Prefix compares components
// literally and would give |F| there.
// A hop that touches an intermediate buffer cannot issue a request larger
// than the buffer, so its request is capped at TH. Then
//   hop_bps_i  = tp_i(min(PREFIX_i, cap_i, R_i))  (the throughput constraint)
//   TP         = min(min_i hop_bps_i, SHARED)
//   SUFFIX̄_i <= TH for every hop between two intermediates (space).
// where R_i is the largest request the runtime issues on the channel
// (TopologyEdge::max_request_bytes; none when unknown): a longer run still
// goes out in requests of that size, and a disk channel measured with
// 64 MiB requests is faster than with the 4 MiB ones it gets;
// tp_i is the edge's contiguous curve (TopologyEdge::tp_contiguous,
// measured with plain copies) when hop i moves one contiguous run
// (PREFIX_i is the whole instance; read at min(PREFIX_i, cap_i), the curve
// is of whole copies), else its run-size curve (for runs smaller than an
// entry, between its 2-field and 8-field figures by the number of runs an
// entry holds: TopologyEdge::tp_fields8, HopThroughput); and SHARED is
// the shared-memory bound on the uncapped Memcpy hops of one node, k of
// them, each measured alone at its hop_bps: hops of one channel share its
// threads, so their times add up (1 / sum (1 / hop_bps_i) over the
// channel's hops); and every hop crosses the node's memory, so together
// they move at most node_copy_bps / k, where node_copy_bps is what the
// node copies with every core at once (TopologyEdge::node_copy_bps; when
// unmeasured, the times of all k hops add up). Exactly two such hops
// pipelined through the runtime's ring move node_pipe_bps, measured with
// that ring (TopologyEdge::node_pipe_bps; MeasureNodePipe), instead: the
// ring stays in the cache, so the pair crosses memory about once; the pipe
// predicts such a pair far better than node_copy_bps / 2 or the sum of
// times (docs/benchmarks/design-measurements.md, "Copy loops and plans").
// Where the pair's hops are on separate channels, the pipe replaces their
// hop_bps too (scaled down for a hop that changes the layout,
// PipedHopRates): next to the cached ring each hop runs above the curve it
// was measured at between two memory-sized areas.
// Hops on other channels
// (disk, network, GPU) or paced by a rate cap are left out.
// SHARED is applied when a path is evaluated; the search below ranks paths
// by the hop constraints alone.
//
// The algorithm (§4.2, with the choices this implementation makes):
//  1. Paths: acyclic (a memory appears once, except that a self-loop may
//     repeat it once, and a copy within one memory may start and end
//     there), at most `max_hops` hops. They leave the nodes of the source
//     and destination only when those two nodes cannot reach each other on
//     their own, or when `relays` is set (the caller knows of links that
//     can beat the direct one; otherwise a large cluster's relays would
//     only swamp the search).
//  2. Layouts per intermediate come from a small candidate set derived from
//     the source and destination layouts (see CandidateLayouts); blocking
//     factors are variables, one per dimension, shared by all layouts of a
//     path (the chunk shape that every XD of a transfer works on).
//  3. For a path and a target TP, each throughput constraint becomes
//     PREFIX_i >= r'_i with r'_i = tp_i.MinRequestFor(TP); with the space
//     constraints this is linear in log2 of the blocking factors. Blocking
//     factors are powers of two (clamped to the extent), and the system is
//     solved exactly over them by bounds propagation with branching (each
//     variable ranges over at most 64 values and appears in monotone terms).
//  4. Per path, a binary search on TP between the incumbent and the path's
//     own bound finds its best throughput (to 1e-4); the best path wins.
//     Among paths within improve_margin of each other the shorter one wins.
// The search is a depth-first branch and bound over (memory, layout) pairs,
// by increasing hop count, in passes with a falling threshold tau: the first
// pass only looks for paths within stop_fraction of the upper bound U (the
// paper's early exit), each next one lowers tau below the best bound the
// previous one cut off, until tau is under the incumbent and the pass is
// exact. Pruning, exact unless marked:
//  - U and the completion bounds come from a widest-path search over peak
//    bandwidths (the paper's BFS bound, tightened per memory);
//  - a partial path is dropped when its bottleneck of peaks, or of its hops
//    at their largest possible requests, cannot beat the threshold; and
//    when bounds propagation proves its own constraint system (throughput
//    and space) infeasible at the threshold: its constraints are a subset
//    of any completion's;
//  - detours: x -> y -> z is dropped when the direct channel x -> z is at
//    least as fast as both hops for every request size (see Detour in
//    path_search.cc): Memcpy chains, self-loops beside Memcpy hops, GPU round trips;
//  - a self-loop must convert the layout (otherwise it only adds a copy);
//  - (heuristic, §4.2) on channels that behave poorly with small requests
//    (tp at probe_request_bytes below poor_fraction of the peak) the
//    innermost component may not change, and between two intermediate
//    buffers the layout may not change at all. Dropped, with a second
//    search, when they leave no path;
//  - the simple planner's path seeds the incumbent, so the full planner is
//    never worse than the simple one under the model.
// Planning is cheapest where a path soon reaches U and dearest for
// disk-to-disk permutations whose space constraint keeps them far below U
// (every pass runs in full; docs/benchmarks/design-measurements.md,
// "Planning").
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "planner/simple_planner.h"
#include "planner/topology.h"

namespace isometry {

struct FullPlannerOptions {
  // TH: the largest intermediate buffer of one stage (§4.1).
  uint64_t space_threshold = uint64_t{32} << 20;
  // The smallest request the model recommends (Path::request_bytes), so
  // that channels with no measured per-request cost still get requests
  // worth scheduling.
  uint64_t min_request_bytes = uint64_t{64} << 10;
  // Longest path considered, in hops. The paper's longest path has 4;
  // 5 allows staging on both sides (FBM -> ZCM -> REG -> REG* -> ZCM* ->
  // FBM*). On fig. 4's graph, 6 found no better path in 250 transfers and
  // cost 2.5x the time.
  int max_hops = 5;
  // Stop once a path reaches this fraction of the upper bound U.
  double stop_fraction = 0.99;
  // A path replaces the incumbent only when it is faster by this fraction.
  double improve_margin = 1e-3;
  // A channel is "poor with small requests" when tp(probe_request_bytes) <
  // poor_fraction * peak.
  uint64_t probe_request_bytes = 4096;
  double poor_fraction = 0.5;
  // Let paths leave the ends' nodes even when those reach each other
  // (relays through a third node): for a cluster whose declared links
  // can make a two-crossing path faster than the direct one.
  bool relays = false;
};

// Checks a path against the model and fills its estimates (predicted_bps,
// hop_bps, request_bytes, buffer_bytes; see Path). `element_bytes` is the
// smallest field's size, the unit of a run when a hop's common prefix
// leaves F out (see the model above); 1 when unknown, which counts such
// runs in points (conservative). Errors: a malformed path,
// a hop with no channel in `topo` (connectivity), a layout of the wrong
// dimensionality, SUFFIX̄ > TH between two intermediates (space), an empty
// or invalid index space. Pure function; thread-safe.
Result<Path> EvaluatePath(const Topology& topo, Path path, const Box& bounds, uint64_t field_bytes,
                          const FullPlannerOptions& options = {}, uint64_t element_bytes = 1);

// The candidate layouts for intermediate buffers, with every variable
// blocking factor of dimension d set to blocks[d] (clamped to [1, extent]).
// The set, in order:
//   the source layout; the destination layout (when different);
//   when they differ even after refinement, the blocked layouts <ins..., outs...> whose inner part
//   follows the innermost-first order of the source or of the destination
//   (F among the ins) and whose outer part follows the outer order of the
//   source or of the destination: at most four more, those equal to the
//   source or destination after refinement left out.
// Every dimension is split in the blocked layouts, with the fixed blocking
// factor of the source or destination where one of them (or both, equally)
// has one, a variable otherwise. These are the layouts of the paper's table
// 3 (inner blocks in source order, then in destination order, with shared
// outer blocks) and the hybrid (AOSOA) layout of an AOS<->SOA conversion.
std::vector<Layout> CandidateLayouts(const Layout& src, const Layout& dst, const Box& bounds,
                                     const std::array<int64_t, kMaxDims>& blocks);

// The planner over one topology. Construction precomputes adjacency and
// never fails (edges naming unknown memories are ignored; of two edges with
// the same ends the first counts, as in Topology::FindEdge). Plan is const
// and thread-safe.
class FullPlanner {
 public:
  explicit FullPlanner(Topology topo, FullPlannerOptions options = {});
  ~FullPlanner();
  FullPlanner(FullPlanner&&) noexcept;
  FullPlanner& operator=(FullPlanner&&) noexcept;

  // The best path under the model, its intermediate layouts concrete
  // (blocking factors chosen), algorithm "full", estimates filled as by
  // EvaluatePath. Errors: unknown memory, bad index space or layouts
  // (InvalidArgument), no path (NotFound), no path satisfying the space
  // constraints (FailedPrecondition).
  Result<Path> Plan(const PlanEndpoint& src, const PlanEndpoint& dst, const Box& bounds,
                    uint64_t field_bytes, uint64_t element_bytes = 1) const;

  // The simple algorithm (PlanSimple, §4.4) on the indexed graph: the same
  // path or error as PlanSimple(topology(), src, dst), without a scan of
  // every edge per memory visited (a cost that grows with the graph;
  // docs/benchmarks/design-measurements.md, "Planning").
  // Path estimates are not filled.
  Result<Path> Simple(const PlanEndpoint& src, const PlanEndpoint& dst) const;

  // EvaluatePath over this planner's topology (edges found by index, not
  // by a scan). With `durable` false, disk writes count at their unsynced
  // curve (TopologyEdge::tp_unsynced) where they have one.
  Result<Path> Evaluate(Path path, const Box& bounds, uint64_t field_bytes,
                        uint64_t element_bytes = 1, bool durable = true) const;

  const Topology& topology() const;
  const FullPlannerOptions& options() const;

 private:
  struct Graph;
  std::unique_ptr<const Graph> graph_;
};

// One-shot form of FullPlanner::Plan (builds the adjacency every call).
Result<Path> PlanFull(const Topology& topo, const PlanEndpoint& src, const PlanEndpoint& dst,
                      const Box& bounds, uint64_t field_bytes,
                      const FullPlannerOptions& options = {});

}  // namespace isometry
