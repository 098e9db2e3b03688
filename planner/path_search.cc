#include "planner/path_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "planner/block_constraints.h"
#include "planner/path_evaluation.h"
#include "planner/shape_algebra.h"

namespace isometry::full_planner_internal {
namespace {

class Search {
 public:
  Search(const Graph& g, const PlanEndpoint& src, const PlanEndpoint& dst, const Box& bounds,
         uint64_t field_bytes, uint64_t element_bytes)
      : g_(g),
        o_(g.options),
        src_(src),
        dst_(dst),
        bounds_(bounds),
        fb_(field_bytes),
        eb_(std::max<uint64_t>(element_bytes, 1)) {}

  Result<Path> Run();

 private:
  struct PairModel {
    bool ready = false;
    bool shares_innermost = false;  // the common prefix is not empty
    Expr prefix, sbar;
    double max_prefix_bytes = 0;
    double min_sbar_log = 0;
  };

  const PairModel& Pair(int a, int b);
  void PrepareGraphBounds();
  std::optional<Values> FeasibleAt(double tp, bool exact = true) const;
  Values UsedDomain() const;
  void Dfs(int m, int c, int depth, double bound);
  bool ArcFits(int m, const Arc& a, int depth) const;
  void Extend(int m, int c, const Arc& a, int depth, double reach);
  bool Detour(int x, int edge_xy, const Arc& yz) const;
  void SolveLeaf(double bound);
  void RunPasses();
  void Consider(Path p);
  double Threshold() const { return std::max(tau_, best_ * (1 + o_.improve_margin)); }
  void Prune(double bound) { max_pruned_ = std::max(max_pruned_, bound); }
  bool Done() const { return best_ > 0 && best_ >= o_.stop_fraction * upper_; }

  const Graph& g_;
  const FullPlannerOptions& o_;
  const PlanEndpoint& src_;
  const PlanEndpoint& dst_;
  const Box& bounds_;
  const uint64_t fb_;
  const uint64_t eb_;  // element bytes: the run unit of a prefix without F
  int dims_ = 0;
  int s_ = -1, d_ = -1;  // memory indices
  double log_th_ = 0;

  // Candidate layouts and their pairwise models.
  std::vector<Shape> cands_;
  int dst_cand_ = 0;
  std::vector<PairModel> pairs_;
  BlockSystem vars_;  // their blocking factors

  // Graph bounds.
  std::vector<char> allowed_;
  std::vector<double> widest_;  // largest bottleneck of peaks to the destination
  std::vector<int> dist_;       // fewest hops to the destination
  double upper_ = 0;            // U

  // Incumbent and search state.
  double best_ = 0;
  std::optional<Path> best_path_;
  double tau_ = 0, max_pruned_ = 0;
  int hops_ = 0;                        // exact length of the paths of this pass
  std::vector<int> mem_, cand_, edge_;  // the partial path
  std::vector<char> visited_, self_used_;

  // The hops of the partial path, with their constraints.
  struct Hop {
    const TopologyEdge* edge;
    const PairModel* pair;
    bool touches_buffer;  // an end is an intermediate buffer: requests <= TH
    bool inner;           // both ends are: SUFFIX̄ <= TH
    // MinRequestFor(request_tp), memoized: descendants ask at the same TP.
    mutable double request_tp = -1;
    mutable std::optional<uint64_t> request;
  };
  std::vector<Hop> hops_list_;
  mutable std::vector<Constraint> scratch_;
  // The §4.2 small-request rule; dropped when it leaves no path at all.
  bool poor_rule_ = true;
  bool poor_pruned_ = false;
};

const Search::PairModel& Search::Pair(int a, int b) {
  PairModel& p = pairs_[static_cast<size_t>(a) * cands_.size() + static_cast<size_t>(b)];
  if (p.ready) {
    return p;
  }
  const PairShape ps = AnalyzePair(cands_[static_cast<size_t>(a)], cands_[static_cast<size_t>(b)]);
  p.shares_innermost = ps.pf > 0;
  p.prefix = vars_.MakeExpr(ps.ra, 0, ps.pf);
  if (!HasFields(ps.ra, 0, ps.pf)) {
    p.prefix.c += std::log2(static_cast<double>(eb_));  // as PrefixBytes
  }
  p.sbar = vars_.MakeExpr(ps.ra, 0, ps.sb);
  Values lo{}, hi = vars_.vmax();
  p.max_prefix_bytes = std::exp2(vars_.Max(p.prefix, lo, hi)) * (1 + 1e-12);
  p.min_sbar_log = vars_.Min(p.sbar, lo, hi);
  p.ready = true;
  return p;
}

void Search::PrepareGraphBounds() {
  const size_t n = g_.topo.memories.size();
  // Stay on the endpoints' nodes when they can reach each other there.
  allowed_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    allowed_[i] = o_.relays || g_.node[i] == src_.memory.node || g_.node[i] == dst_.memory.node;
    // Client process memory is a copy's end, never a staging memory.
    const TopologyMemory& tm = g_.topo.memories[i];
    if (tm.kind == MemoryKind::kProcess && tm.id != src_.memory && tm.id != dst_.memory) {
      allowed_[i] = 0;
    }
  }
  {
    std::vector<char> seen(n, 0);
    std::vector<int> queue{s_};
    seen[static_cast<size_t>(s_)] = 1;
    // An arc into the destination (for a copy within one memory: its
    // self-loop, or the end of a round trip).
    bool reached = false;
    for (size_t q = 0; q < queue.size(); ++q) {
      for (const Arc& a : g_.out[static_cast<size_t>(queue[q])]) {
        const size_t t = static_cast<size_t>(a.to);
        reached = reached || a.to == d_;
        if (allowed_[t] && !seen[t]) {
          seen[t] = 1;
          queue.push_back(a.to);
        }
      }
    }
    if (!reached) {
      allowed_.assign(n, 1);
    }
  }
  // Hop distances and widest bottlenecks to the destination, backwards.
  dist_.assign(n, std::numeric_limits<int>::max());
  dist_[static_cast<size_t>(d_)] = 0;
  std::vector<int> queue{d_};
  for (size_t q = 0; q < queue.size(); ++q) {
    const int m = queue[q];
    for (const Arc& a : g_.in[static_cast<size_t>(m)]) {
      const size_t f = static_cast<size_t>(a.to);
      if (allowed_[f] && dist_[f] == std::numeric_limits<int>::max()) {
        dist_[f] = dist_[static_cast<size_t>(m)] + 1;
        queue.push_back(a.to);
      }
    }
  }
  widest_.assign(n, 0);
  widest_[static_cast<size_t>(d_)] = std::numeric_limits<double>::infinity();
  std::vector<char> done(n, 0);
  while (true) {  // max-min Dijkstra; the graphs are small
    int m = -1;
    for (size_t i = 0; i < n; ++i) {
      if (!done[i] && widest_[i] > 0 && (m < 0 || widest_[i] > widest_[static_cast<size_t>(m)])) {
        m = static_cast<int>(i);
      }
    }
    if (m < 0) {
      break;
    }
    done[static_cast<size_t>(m)] = 1;
    for (const Arc& a : g_.in[static_cast<size_t>(m)]) {
      const size_t f = static_cast<size_t>(a.to);
      if (!allowed_[f] || done[f]) {
        continue;
      }
      widest_[f] = std::max(widest_[f], std::min(a.peak, widest_[static_cast<size_t>(m)]));
    }
  }
  // U: the best first hop with the widest completion (the source may also be
  // the destination, so widest_[s_] alone would be infinite).
  upper_ = 0;
  for (const Arc& a : g_.out[static_cast<size_t>(s_)]) {
    if (allowed_[static_cast<size_t>(a.to)]) {
      upper_ = std::max(upper_, std::min(a.peak, widest_[static_cast<size_t>(a.to)]));
    }
  }
}

// The domain of the blocking factors the partial path's constraints name:
// [0, vmax] for those, [0, 0] for the others.
Values Search::UsedDomain() const {
  Values hi{};
  for (const Hop& h : hops_list_) {
    for (int d = 0; d < dims_; ++d) {
      const size_t dd = static_cast<size_t>(d);
      if (h.pair->prefix.mask[dd] || (h.inner && h.pair->sbar.mask[dd])) {
        hi[dd] = vars_.vmax()[dd];
      }
    }
  }
  return hi;
}

// Blocking factors with which every hop of the partial path reaches `tp`
// and every space constraint holds, or nullopt. The constraints of a partial
// path are a subset of those of any completion, so nullopt rules out every
// completion. With exact == false only bounds propagation runs (no
// branching): a relaxation, nullopt still proves infeasibility, and a value
// is not necessarily a solution.
std::optional<Values> Search::FeasibleAt(double tp, bool exact) const {
  std::vector<Constraint>& cs = scratch_;
  cs.clear();
  for (const Hop& h : hops_list_) {
    if (h.request_tp != tp) {
      h.request = h.edge->tp.MinRequestFor(tp);
      h.request_tp = tp;
    }
    const std::optional<uint64_t>& r = h.request;
    if (!r) {
      return std::nullopt;
    }
    if (h.touches_buffer && *r > o_.space_threshold) {
      return std::nullopt;
    }
    if (static_cast<double>(*r) > h.pair->max_prefix_bytes) {
      return std::nullopt;
    }
    if (*r > 1) {
      cs.push_back({h.pair->prefix, 1, std::log2(static_cast<double>(*r))});
    }
    if (h.inner) {
      cs.push_back({h.pair->sbar, -1, log_th_});
    }
  }
  Values lo{}, hi = UsedDomain();
  const int n = static_cast<int>(cs.size());
  if (!(exact ? vars_.Solve(cs.data(), n, lo, hi) : vars_.Propagate(cs.data(), n, lo, hi))) {
    return std::nullopt;
  }
  return lo;
}

void Search::Consider(Path p) {
  if (p.predicted_bps > best_ * (1 + o_.improve_margin) && p.predicted_bps > 0) {
    best_ = p.predicted_bps;
    best_path_ = std::move(p);
  }
}

// A complete (memory, layout) path: binary search on TP between the
// threshold and the path's bound, then the exact model on the concrete path.
void Search::SolveLeaf(double bound) {
  const int hops = hops_;
  const Values used = UsedDomain();
  const double floor = Threshold();
  double lo = floor > 0 ? floor : bound * 1e-9;
  std::optional<Values> sol = FeasibleAt(lo);
  if (!sol) {
    Prune(std::min(bound, lo));
    return;
  }
  double hi = bound;
  if (std::optional<Values> top = FeasibleAt(hi)) {
    sol = top;
  } else {
    while (hi - lo > 1e-4 * hi) {
      const double mid = lo + (hi - lo) / 2;
      if (std::optional<Values> s = FeasibleAt(mid)) {
        lo = mid;
        sol = s;
      } else {
        hi = mid;
      }
    }
  }
  // Variables no constraint mentions do not matter to the model: leave those
  // dimensions unsplit in effect (block = extent).
  std::array<int64_t, kMaxDims> blocks{};
  for (int d = 0; d < dims_; ++d) {
    const size_t dd = static_cast<size_t>(d);
    blocks[dd] = BlockFor(used[dd] > 0 ? (*sol)[dd] : kMaxVar, bounds_.extent(d));
  }
  Path path;
  path.algorithm = "full";
  std::vector<const TopologyEdge*> edges;
  for (int i = 0; i <= hops; ++i) {
    const size_t ii = static_cast<size_t>(i);
    Result<Layout> l = i == 0 ? Result<Layout>(src_.layout)
                       : i == hops
                           ? Result<Layout>(dst_.layout)
                           : Concretize(cands_[static_cast<size_t>(cand_[ii])], blocks, dims_);
    if (!l.ok()) {
      return;  // cannot happen: candidates are valid layouts
    }
    path.nodes.push_back({g_.topo.memories[static_cast<size_t>(mem_[ii])].id, *std::move(l)});
    if (i < hops) {
      edges.push_back(&g_.topo.edges[static_cast<size_t>(edge_[ii])]);
      path.edges.push_back(*edges.back());
    }
  }
  Result<Path> evaluated = Evaluate(std::move(path), edges, bounds_, fb_, o_, eb_);
  if (evaluated.ok()) {
    Consider(*std::move(evaluated));
  }
}

// True when the hops x -> y (edge_xy) -> z (yz) are a detour that the
// direct channel x -> z dominates: z != x, and tp(x -> z) >= tp(x -> y) and
// >= tp(y -> z) for every request size. Then for any layouts l_x, l_y, l_z,
// PREFIX(l_x, l_z) >= min(PREFIX(l_x, l_y), PREFIX(l_y, l_z)) and SUFFIX̄
// (l_x, l_z) <= the larger of the two SUFFIX̄s (common prefixes and suffixes
// are transitive), dropping y loosens the request caps and space constraints,
// and the shorter path is searched too: so no path with the detour is
// better. Covers chains of Memcpy hops, a self-loop next to a Memcpy hop, and
// round trips through a GPU between two host memories. Not applied when the
// small-request rule would forbid the direct hop's conversion.
bool Search::Detour(int x, int edge_xy, const Arc& yz) const {
  if (x == yz.to) {
    return false;
  }
  const int xz = g_.EdgeIndex(x, yz.to);
  if (xz < 0) {
    return false;
  }
  const size_t e = static_cast<size_t>(xz);
  if (poor_rule_ && g_.edge_poor[e]) {
    return false;
  }
  const int c = g_.edge_curve[e];
  return g_.CurveAtLeast(c, g_.edge_curve[static_cast<size_t>(edge_xy)]) &&
         g_.CurveAtLeast(c, yz.curve);
}

// Depth-first over (memory, layout) pairs; paths of exactly hops_ hops.
void Search::Dfs(int m, int c, int depth, double bound) {
  if (Done()) {
    return;
  }
  if (depth == hops_) {
    if (m == d_ && c == dst_cand_) {
      SolveLeaf(bound);
    }
    return;
  }
  const bool last = depth + 1 == hops_;
  for (const Arc& a : g_.out[static_cast<size_t>(m)]) {
    if (!ArcFits(m, a, depth)) {
      continue;
    }
    double reach = std::min(bound, a.peak);
    if (!last) {
      reach = std::min(reach, widest_[static_cast<size_t>(a.to)]);
    }
    if (reach < Threshold()) {
      Prune(reach);
      continue;
    }
    Extend(m, c, a, depth, reach);
    if (Done()) {
      return;
    }
  }
}

// Whether arc `a` out of memory `m` may be hop `depth`: an allowed memory,
// no memory twice (one self-loop each), the destination reachable in the
// hops left and reached exactly at the end (or one self-loop before it),
// and no detour a direct edge would beat.
bool Search::ArcFits(int m, const Arc& a, int depth) const {
  const int remaining = hops_ - depth;  // hops still to take, this one included
  const size_t mm = static_cast<size_t>(m);
  const size_t t = static_cast<size_t>(a.to);
  if (!allowed_[t]) {
    return false;
  }
  const bool self = a.to == m;
  const bool last = remaining == 1;
  if (self) {
    if (self_used_[mm]) {
      return false;
    }
  } else if (visited_[t] && !(last && a.to == d_)) {
    return false;
  }
  if (last && a.to != d_) {
    return false;
  }
  if (!last) {
    if (dist_[t] > remaining - 1) {
      return false;
    }
    // At the destination early, only its self-loop can follow.
    if (a.to == d_ && (remaining - 1 != 1 || self || !g_.EdgeBetween(d_, d_))) {
      return false;
    }
  }
  return depth < 1 || !Detour(mem_[static_cast<size_t>(depth - 1)], edge_.back(), a);
}

// Tries each layout candidate at the end of arc `a` (hop `depth`, from
// candidate `c`, the path so far bounded by `reach`) and searches on from
// every one the constraints leave.
void Search::Extend(int m, int c, const Arc& a, int depth, double reach) {
  const size_t mm = static_cast<size_t>(m);
  const size_t t = static_cast<size_t>(a.to);
  const bool self = a.to == m;
  const bool last = depth + 1 == hops_;
  const TopologyEdge& e = g_.topo.edges[static_cast<size_t>(a.edge)];
  const bool from_inner = depth > 0, to_inner = !last;
  const int first = last ? dst_cand_ : 0;
  const int end = last ? dst_cand_ + 1 : static_cast<int>(cands_.size());
  for (int c2 = first; c2 < end; ++c2) {
    if (self && c2 == c) {
      continue;  // a self-loop converts or is useless
    }
    // Disk hops never convert (EdgeTraits::converts_layout): a Memcpy hop
    // beside them does it with large disk requests; the caller may still
    // force it.
    if (c2 != c && !e.traits.converts_layout) {
      continue;
    }
    const PairModel& p = Pair(c, c2);
    if (poor_rule_ && a.poor) {
      // §4.2: no conversion of the innermost component on a channel that
      // is poor with small requests; and between two intermediate buffers
      // (whose layouts are both ours to choose) no conversion at all there:
      // a Memcpy hop next to it converts better.
      if (!p.shares_innermost || (from_inner && to_inner && c2 != c)) {
        poor_pruned_ = true;
        continue;
      }
    }
    if (from_inner && to_inner && p.min_sbar_log > log_th_ + kEps) {
      continue;
    }
    double req = p.max_prefix_bytes;
    if (from_inner || to_inner) {
      req = std::min(req, static_cast<double>(o_.space_threshold));
    }
    const double hop = e.tp.At(static_cast<uint64_t>(std::min(req, 1.8e19)));
    const double next = std::min(reach, hop);
    if (next < Threshold()) {
      Prune(next);
      continue;
    }
    hops_list_.push_back({&e, &p, from_inner || to_inner, from_inner && to_inner});
    // The hop bounds above treat blocking factors one hop at a time; when
    // this hop constrains them, check the partial path's whole system (the
    // space constraint couples them: fig. 6's x_in x y_in <= TH).
    bool variables = false;
    for (int d = 0; d < dims_; ++d) {
      const size_t dd = static_cast<size_t>(d);
      variables = variables || p.prefix.mask[dd] || (from_inner && to_inner && p.sbar.mask[dd]);
    }
    if (variables && !FeasibleAt(Threshold(), /*exact=*/false)) {
      hops_list_.pop_back();
      Prune(std::min(next, Threshold()) * (1 - 1e-9));
      continue;
    }
    mem_.push_back(a.to);
    cand_.push_back(c2);
    edge_.push_back(a.edge);
    const bool was_visited = visited_[t];
    if (self) {
      self_used_[mm] = 1;
    }
    visited_[t] = 1;
    Dfs(a.to, c2, depth + 1, next);
    visited_[t] = was_visited;
    if (self) {
      self_used_[mm] = 0;
    }
    mem_.pop_back();
    cand_.pop_back();
    edge_.pop_back();
    hops_list_.pop_back();
    if (Done()) {
      return;
    }
  }
}

// Passes with a falling threshold tau: the first only looks for paths within
// stop_fraction of U (the paper's early exit); each next one lowers tau below
// the best bound the previous pass cut off, until tau is under the incumbent
// and the pass is an exact branch and bound. Within a pass, paths are tried by
// increasing hop count, so a shorter path wins a tie.
void Search::RunPasses() {
  tau_ = o_.stop_fraction * upper_;
  while (!Done()) {
    max_pruned_ = 0;
    for (hops_ = 1; hops_ <= o_.max_hops && !Done(); ++hops_) {
      mem_.assign(1, s_);
      cand_.assign(1, 0);
      edge_.clear();
      hops_list_.clear();
      visited_[static_cast<size_t>(s_)] = 1;
      Dfs(s_, 0, 0, std::numeric_limits<double>::infinity());
      visited_[static_cast<size_t>(s_)] = 0;
    }
    const double floor = best_ * (1 + o_.improve_margin);
    if (best_ >= tau_ || max_pruned_ <= floor || tau_ <= floor) {
      break;
    }
    tau_ = std::max(floor, 0.5 * std::min(max_pruned_, tau_));
  }
}

Result<Path> Search::Run() {
  ISO_RETURN_IF_ERROR(ValidateRequest(bounds_, fb_));
  ISO_RETURN_IF_ERROR(ValidateLayout(src_.layout, bounds_, "source"));
  ISO_RETURN_IF_ERROR(ValidateLayout(dst_.layout, bounds_, "destination"));
  s_ = g_.Index(src_.memory);
  d_ = g_.Index(dst_.memory);
  if (s_ < 0) {
    return NotFound("unknown memory ", ToString(src_.memory));
  }
  if (d_ < 0) {
    return NotFound("unknown memory ", ToString(dst_.memory));
  }
  dims_ = bounds_.dims;
  log_th_ = std::log2(static_cast<double>(std::max<uint64_t>(o_.space_threshold, 1)));

  cands_ = CandidateShapes(ShapeOf(src_.layout), ShapeOf(dst_.layout), dims_);
  dst_cand_ = cands_.size() > 1 ? 1 : 0;
  pairs_.assign(cands_.size() * cands_.size(), PairModel{});
  vars_ = BlockSystem(bounds_, fb_, cands_);
  PrepareGraphBounds();
  if (upper_ <= 0) {
    return NotFound("no path of channels leads from memory '", g_.topo.NameOf(src_.memory),
                    "' to '", g_.topo.NameOf(dst_.memory), "'");
  }

  // The simple planner's path is the first incumbent.
  if (Result<Path> simple = g_.Simple(src_, dst_); simple.ok()) {
    std::vector<const TopologyEdge*> edges;
    bool connected = true;
    for (const TopologyEdge& e : simple->edges) {
      const int a = g_.Index(e.src), b = g_.Index(e.dst);
      const TopologyEdge* te = a >= 0 && b >= 0 ? g_.EdgeBetween(a, b) : nullptr;
      connected = connected && te;
      edges.push_back(te);
    }
    if (connected) {
      Result<Path> evaluated = Evaluate(*std::move(simple), edges, bounds_, fb_, o_, eb_);
      if (evaluated.ok()) {
        evaluated->algorithm = "full";
        Consider(*std::move(evaluated));
      }
    }
  }

  visited_.assign(g_.topo.memories.size(), 0);
  self_used_.assign(g_.topo.memories.size(), 0);
  RunPasses();
  if (!best_path_ && poor_pruned_) {
    poor_rule_ = false;
    RunPasses();
  }
  if (!best_path_) {
    return FailedPrecondition("no path from '", g_.topo.NameOf(src_.memory), "' to '",
                              g_.topo.NameOf(dst_.memory), "' within ", o_.max_hops,
                              " hops satisfies the space threshold of ", o_.space_threshold,
                              " bytes");
  }
  return *std::move(best_path_);
}

}  // namespace

Result<Path> SearchBestPath(const Graph& g, const PlanEndpoint& src, const PlanEndpoint& dst,
                            const Box& bounds, uint64_t field_bytes, uint64_t element_bytes) {
  Search search(g, src, dst, bounds, field_bytes, element_bytes);
  return search.Run();
}

}  // namespace isometry::full_planner_internal
