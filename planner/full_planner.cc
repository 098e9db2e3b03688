#include "planner/full_planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "planner/simple_planner.h"

namespace isometry {

// Names used only in this file. A named namespace (not an anonymous one)
// because FullPlanner::Graph derives from one of them.
namespace full_planner_internal {

using Kind = LayoutComponent::Kind;

constexpr double kEps = 1e-9;  // slack of comparisons between sums of log2s
constexpr int kMaxAtoms = 1 + 2 * kMaxDims;
constexpr int kMaxVar = 63;  // blocking factors are 2^0 .. 2^63 (clamped to the extent)

uint64_t SatMul(uint64_t a, uint64_t b) {
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return p > std::numeric_limits<uint64_t>::max() ? std::numeric_limits<uint64_t>::max()
                                                  : static_cast<uint64_t>(p);
}

uint64_t CeilDiv(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

// ---------------------------------------------------------------------------
// Shapes: layouts whose blocking factors may be variables.

enum class AtomKind : uint8_t { kF, kWhole, kIn, kOut };

struct Atom {
  AtomKind kind = AtomKind::kF;
  int8_t dim = 0;
  // kIn / kOut: the blocking factor; 0 is the path's variable for `dim`.
  int64_t block = 0;
  bool operator==(const Atom&) const = default;
};

struct Shape {
  std::array<Atom, kMaxAtoms> at{};
  int n = 0;

  void Push(Atom a) { at[static_cast<size_t>(n++)] = a; }
  const Atom& operator[](int i) const { return at[static_cast<size_t>(i)]; }
  bool operator==(const Shape& o) const {
    return n == o.n && std::equal(at.begin(), at.begin() + n, o.at.begin());
  }
  // -1 when dimension d is whole, else its blocking factor (0: variable).
  int64_t SplitBlock(int d) const {
    for (int i = 0; i < n; ++i) {
      if (at[static_cast<size_t>(i)].kind == AtomKind::kIn && at[static_cast<size_t>(i)].dim == d) {
        return at[static_cast<size_t>(i)].block;
      }
    }
    return -1;
  }
};

Shape ShapeOf(const Layout& l) {
  Shape s;
  for (const LayoutComponent& c : l.components()) {
    const auto dim = static_cast<int8_t>(c.dim);
    switch (c.kind) {
      case Kind::kFields:
        s.Push({AtomKind::kF, 0, 0});
        break;
      case Kind::kDim:
        s.Push({AtomKind::kWhole, dim, 0});
        break;
      case Kind::kDimIn:
        s.Push({AtomKind::kIn, dim, c.block});
        break;
      case Kind::kDimOut:
        s.Push({AtomKind::kOut, dim, l.block_of(c.dim)});
        break;
    }
  }
  return s;
}

// `a` with every whole dimension that `b` splits read as the same split.
Shape Refine(const Shape& a, const Shape& b) {
  std::array<int64_t, kMaxDims> split;
  split.fill(-1);
  for (int i = 0; i < b.n; ++i) {
    if (b[i].kind == AtomKind::kIn) split[static_cast<size_t>(b[i].dim)] = b[i].block;
  }
  Shape r;
  for (int i = 0; i < a.n; ++i) {
    const Atom& x = a[i];
    const int64_t s = x.kind == AtomKind::kWhole ? split[static_cast<size_t>(x.dim)] : -1;
    if (s >= 0) {
      r.Push({AtomKind::kIn, x.dim, s});
      r.Push({AtomKind::kOut, x.dim, s});
    } else {
      r.Push(x);
    }
  }
  return r;
}

bool Equivalent(const Shape& a, const Shape& b) { return Refine(a, b) == Refine(b, a); }

// The refined pair: PREFIX is the product of ra[0, pf), SUFFIX̄ of ra[0, sb).
struct PairShape {
  Shape ra;
  int pf = 0;
  int sb = 0;
};

PairShape AnalyzePair(const Shape& a, const Shape& b) {
  PairShape p;
  p.ra = Refine(a, b);
  const Shape rb = Refine(b, a);
  while (p.pf < p.ra.n && p.pf < rb.n && p.ra[p.pf] == rb[p.pf]) ++p.pf;
  int k = 0;
  while (k < p.ra.n && k < rb.n && p.ra[p.ra.n - 1 - k] == rb[rb.n - 1 - k]) ++k;
  p.sb = p.ra.n - k;
  return p;
}

// Size of one concrete atom (no variables).
uint64_t AtomBytes(const Atom& x, const Box& bounds, uint64_t field_bytes) {
  const uint64_t e = x.kind == AtomKind::kF ? 0 : static_cast<uint64_t>(bounds.extent(x.dim));
  switch (x.kind) {
    case AtomKind::kF:
      return field_bytes;
    case AtomKind::kWhole:
      return e;
    case AtomKind::kIn:
      return static_cast<uint64_t>(x.block);
    case AtomKind::kOut:
      return CeilDiv(e, static_cast<uint64_t>(x.block));
  }
  return 0;
}

uint64_t Product(const Shape& s, int from, int to, const Box& bounds, uint64_t field_bytes) {
  uint64_t p = 1;
  for (int i = from; i < to; ++i) p = SatMul(p, AtomBytes(s[i], bounds, field_bytes));
  return p;
}

// Innermost-first order of F and the dimensions by their innermost
// component (-1 stands for F).
std::vector<int> InnerOrder(const Shape& s) {
  std::vector<int> order;
  for (int i = 0; i < s.n; ++i) {
    const int t = s[i].kind == AtomKind::kF ? -1 : s[i].dim;
    if (std::find(order.begin(), order.end(), t) == order.end()) order.push_back(t);
  }
  return order;
}

// Innermost-first order of the dimensions by their outermost component.
std::vector<int> OuterOrder(const Shape& s) {
  std::vector<int> order;
  for (int i = s.n - 1; i >= 0; --i) {
    if (s[i].kind == AtomKind::kF) continue;
    if (std::find(order.begin(), order.end(), s[i].dim) == order.end()) order.push_back(s[i].dim);
  }
  std::reverse(order.begin(), order.end());
  return order;
}

// See CandidateLayouts in the header. Element 0 is the source; element 1 the
// destination unless the two are equivalent.
std::vector<Shape> CandidateShapes(const Shape& src, const Shape& dst, int dims) {
  std::vector<Shape> c{src};
  if (src == dst) return c;
  c.push_back(dst);
  // Equal up to refinement (e.g. <F,x> and <F,x_in=c,x_out>): no conversion
  // to stage. Both stay: with padding (c not dividing |x|) their sizes differ.
  if (Equivalent(src, dst)) return c;
  std::array<int64_t, kMaxDims> block{};
  for (int d = 0; d < dims; ++d) {
    const int64_t bs = src.SplitBlock(d), bd = dst.SplitBlock(d);
    if (bs > 0 && (bd < 0 || bd == bs)) {
      block[static_cast<size_t>(d)] = bs;
    } else if (bd > 0 && bs < 0) {
      block[static_cast<size_t>(d)] = bd;
    } else {
      block[static_cast<size_t>(d)] = 0;  // variable
    }
  }
  for (const Shape* inner : {&src, &dst}) {
    for (const Shape* outer : {&src, &dst}) {
      Shape b;
      for (int t : InnerOrder(*inner)) {
        if (t < 0) {
          b.Push({AtomKind::kF, 0, 0});
        } else {
          b.Push({AtomKind::kIn, static_cast<int8_t>(t), block[static_cast<size_t>(t)]});
        }
      }
      for (int d : OuterOrder(*outer)) {
        b.Push({AtomKind::kOut, static_cast<int8_t>(d), block[static_cast<size_t>(d)]});
      }
      if (std::none_of(c.begin(), c.end(), [&b](const Shape& s) { return Equivalent(s, b); })) {
        c.push_back(b);
      }
    }
  }
  return c;
}

int64_t BlockFor(int v, int64_t extent) {
  const int64_t e = std::max<int64_t>(extent, 1);
  return v >= 62 ? e : std::min<int64_t>(int64_t{1} << v, e);
}

// A shape with its variables replaced by blocks[d].
Result<Layout> Concretize(const Shape& s, const std::array<int64_t, kMaxDims>& blocks, int dims) {
  std::vector<LayoutComponent> comps;
  for (int i = 0; i < s.n; ++i) {
    const Atom& x = s[i];
    switch (x.kind) {
      case AtomKind::kF:
        comps.push_back({Kind::kFields, 0, 0});
        break;
      case AtomKind::kWhole:
        comps.push_back({Kind::kDim, x.dim, 0});
        break;
      case AtomKind::kIn:
        comps.push_back(
            {Kind::kDimIn, x.dim, x.block > 0 ? x.block : blocks[static_cast<size_t>(x.dim)]});
        break;
      case AtomKind::kOut:
        comps.push_back({Kind::kDimOut, x.dim, 0});
        break;
    }
  }
  return Layout::Make(std::move(comps), dims);
}

// ---------------------------------------------------------------------------
// The model on a concrete path, with its edges already looked up.

Result<Path> Evaluate(Path path, const std::vector<const TopologyEdge*>& edges, const Box& bounds,
                      uint64_t field_bytes, const FullPlannerOptions& o) {
  const size_t hops = edges.size();
  const uint64_t th = o.space_threshold;
  std::vector<Shape> shapes;
  for (const PathNode& n : path.nodes) shapes.push_back(ShapeOf(n.layout));
  std::vector<uint64_t> prefix(hops), sbar(hops), cap(hops);
  path.hop_bps.assign(hops, 0);
  double tp = std::numeric_limits<double>::infinity();
  for (size_t h = 0; h < hops; ++h) {
    const PairShape p = AnalyzePair(shapes[h], shapes[h + 1]);
    prefix[h] = Product(p.ra, 0, p.pf, bounds, field_bytes);
    sbar[h] = Product(p.ra, 0, p.sb, bounds, field_bytes);
    const bool from_inner = h > 0, to_inner = h + 1 < hops;
    if (from_inner && to_inner && sbar[h] > th) {
      return FailedPrecondition("space: hop ", h, " (", path.nodes[h].layout.ToString(), " -> ",
                                path.nodes[h + 1].layout.ToString(), ") shuffles ", sbar[h],
                                " bytes between two intermediate buffers; the threshold is ", th);
    }
    cap[h] = from_inner || to_inner ? std::min(prefix[h], th) : prefix[h];
    path.hop_bps[h] = edges[h]->tp.At(cap[h]);
    tp = std::min(tp, path.hop_bps[h]);
    path.edges[h] = *edges[h];
  }
  path.predicted_bps = tp;
  path.request_bytes.assign(hops, 0);
  for (size_t h = 0; h < hops; ++h) {
    uint64_t r = edges[h]->tp.MinRequestFor(tp).value_or(cap[h]);
    path.request_bytes[h] = std::min(std::max(r, o.min_request_bytes), cap[h]);
  }
  path.buffer_bytes.assign(hops - 1, 0);
  for (size_t k = 0; k + 1 < hops; ++k) {  // the buffer at nodes[k + 1]
    uint64_t b = std::max(path.request_bytes[k], path.request_bytes[k + 1]);
    if (k >= 1) b = std::max(b, sbar[k]);            // hop k joins two intermediates
    if (k + 2 < hops) b = std::max(b, sbar[k + 1]);  // so does hop k + 1
    const Shape& s = shapes[k + 1];
    path.buffer_bytes[k] = std::min(b, Product(s, 0, s.n, bounds, field_bytes));
  }
  return path;
}

Status ValidateRequest(const Box& bounds, uint64_t field_bytes) {
  ISO_RETURN_IF_ERROR(bounds.Validate("index space"));
  if (bounds.empty()) return InvalidArgument("index space ", ToString(bounds), " is empty");
  if (field_bytes == 0) return InvalidArgument("the entry size |F| is 0 bytes");
  return OkStatus();
}

Status ValidateLayout(const Layout& l, const Box& bounds, std::string_view what) {
  if (l.dims() != bounds.dims) {
    return InvalidArgument(what, " layout '", l.ToString(), "' has ", l.dims(),
                           " dimension(s); the index space has ", bounds.dims);
  }
  return OkStatus();
}

// ---------------------------------------------------------------------------
// The transfer graph, indexed.

struct Arc {
  int to = 0;  // for in-arcs: the source memory
  int edge = 0;
  double peak = 0;
  bool poor = false;  // behaves poorly with small requests
  int curve = -1;     // index of its throughput function among the distinct ones
};

// Beyond this many distinct throughput functions the pairwise comparison
// table is not built and the detour rule is off.
constexpr size_t kMaxCurves = 128;

struct Graph {
  Graph(Topology t, FullPlannerOptions o) : topo(std::move(t)), options(o) {
    const size_t n = topo.memories.size();
    for (size_t i = 0; i < n; ++i) index.push_back({topo.memories[i].id, static_cast<int>(i)});
    std::sort(index.begin(), index.end());
    out.resize(n);
    in.resize(n);
    for (const TopologyMemory& m : topo.memories) node.push_back(m.id.node);
    std::vector<const ThroughputFunction*> curves;
    edge_curve.assign(topo.edges.size(), -1);
    edge_poor.assign(topo.edges.size(), 0);
    for (size_t e = 0; e < topo.edges.size(); ++e) {
      const TopologyEdge& te = topo.edges[e];
      const int s = Index(te.src), d = Index(te.dst);
      if (s < 0 || d < 0) continue;
      const uint64_t key = static_cast<uint64_t>(s) * n + static_cast<uint64_t>(d);
      auto at = std::lower_bound(pairs.begin(), pairs.end(), std::pair<uint64_t, int>{key, -1});
      if (at != pairs.end() && at->first == key) continue;  // FindEdge keeps the first
      pairs.insert(at, {key, static_cast<int>(e)});
      const double peak = te.tp.Peak();
      const bool poor = te.tp.At(options.probe_request_bytes) < options.poor_fraction * peak;
      int curve = -1;
      for (size_t c = 0; c < curves.size() && curve < 0; ++c) {
        if (*curves[c] == te.tp) curve = static_cast<int>(c);
      }
      if (curve < 0 && curves.size() < kMaxCurves) {
        curve = static_cast<int>(curves.size());
        curves.push_back(&te.tp);
      }
      out[static_cast<size_t>(s)].push_back({d, static_cast<int>(e), peak, poor, curve});
      in[static_cast<size_t>(d)].push_back({s, static_cast<int>(e), peak, poor, curve});
      edge_curve[e] = curve;
      edge_poor[e] = poor;
    }
    curve_count = curves.size();
    at_least.assign(curve_count * curve_count, 0);
    for (size_t a = 0; a < curve_count; ++a) {
      for (size_t b = 0; b < curve_count; ++b) {
        at_least[a * curve_count + b] = curves[a]->AtLeast(*curves[b]);
      }
    }
    out_in_topo_order = out;
    // Fast channels first: good paths are found early and prune the rest.
    for (auto& arcs : out) {
      std::stable_sort(arcs.begin(), arcs.end(),
                       [](const Arc& a, const Arc& b) { return a.peak > b.peak; });
    }
  }

  int Index(MemoryId id) const {
    auto it = std::lower_bound(index.begin(), index.end(), std::pair<MemoryId, int>{id, -1});
    return it != index.end() && it->first == id ? it->second : -1;
  }
  // The edge index of the channel s -> d, or -1.
  int EdgeIndex(int s, int d) const {
    const uint64_t key = static_cast<uint64_t>(s) * topo.memories.size() + static_cast<uint64_t>(d);
    auto at = std::lower_bound(pairs.begin(), pairs.end(), std::pair<uint64_t, int>{key, -1});
    return at != pairs.end() && at->first == key ? at->second : -1;
  }
  const TopologyEdge* EdgeBetween(int s, int d) const {
    const int e = EdgeIndex(s, d);
    return e < 0 ? nullptr : &topo.edges[static_cast<size_t>(e)];
  }
  // tp of curve a >= tp of curve b for every request size (false if unknown).
  bool CurveAtLeast(int a, int b) const {
    return a >= 0 && b >= 0 &&
           at_least[static_cast<size_t>(a) * curve_count + static_cast<size_t>(b)];
  }

  Topology topo;
  FullPlannerOptions options;
  std::vector<std::pair<MemoryId, int>> index;  // sorted by id
  std::vector<uint32_t> node;                   // node of each memory
  std::vector<std::vector<Arc>> out, in;
  std::vector<std::vector<Arc>> out_in_topo_order;  // the order PlanSimple scans
  std::vector<std::pair<uint64_t, int>> pairs;      // (src * n + dst, edge), sorted
  std::vector<int> edge_curve;                      // per edge index (-1: ignored edge)
  std::vector<char> edge_poor;                      // per edge index
  size_t curve_count = 0;
  std::vector<char> at_least;  // curve_count x curve_count: row >= column pointwise

  Result<Path> Simple(const PlanEndpoint& src, const PlanEndpoint& dst) const;
};

// PlanSimple (simple_planner.cc) step for step, on adjacency lists: the BFS
// visits memories and, per memory, edges in the topology's order, so the
// same shortest path wins; the conversion hop is chosen by the same rule.
Result<Path> Graph::Simple(const PlanEndpoint& src, const PlanEndpoint& dst) const {
  const int s = Index(src.memory), d = Index(dst.memory);
  if (s < 0) return NotFound("unknown memory ", ToString(src.memory));
  if (d < 0) return NotFound("unknown memory ", ToString(dst.memory));
  std::vector<const TopologyEdge*> edges;
  if (const TopologyEdge* self = s == d ? EdgeBetween(s, s) : nullptr) {
    edges.push_back(self);
  } else {
    // BFS as PlanSimple's: without a self-loop, a copy within one memory
    // is the shortest round trip through others.
    std::vector<const Arc*> via(topo.memories.size(), nullptr);
    std::vector<char> seen(topo.memories.size(), 0);
    std::vector<int> queue{s};
    seen[static_cast<size_t>(s)] = 1;
    const Arc* last = nullptr;
    for (size_t q = 0; q < queue.size() && !last; ++q) {
      for (const Arc& a : out_in_topo_order[static_cast<size_t>(queue[q])]) {
        if (a.to == queue[q]) continue;  // a self-loop
        if (a.to == d) {
          last = &a;
          break;
        }
        const size_t t = static_cast<size_t>(a.to);
        if (seen[t]) continue;
        seen[t] = 1;
        via[t] = &a;
        queue.push_back(a.to);
      }
    }
    if (!last) {
      if (s == d) {
        return NotFound("no channel copies within memory '", topo.NameOf(src.memory), "'",
                        ", directly or through another memory");
      }
      return NotFound("no path of channels leads from memory '", topo.NameOf(src.memory), "' to '",
                      topo.NameOf(dst.memory), "'");
    }
    edges.push_back(&topo.edges[static_cast<size_t>(last->edge)]);
    for (int m = Index(edges.back()->src); m != s;) {
      const Arc* a = via[static_cast<size_t>(m)];
      edges.push_back(&topo.edges[static_cast<size_t>(a->edge)]);
      m = Index(edges.back()->src);
    }
    std::reverse(edges.begin(), edges.end());
  }
  return PlaceConversion(topo, src, dst, std::move(edges), [this](MemoryId m) {
    const int i = Index(m);
    return i < 0 ? nullptr : EdgeBetween(i, i);
  });
}

// ---------------------------------------------------------------------------
// Sums of log2 sizes: a constant plus, per dimension, the terms of its
// variable: mask 1 = x_in (log2 c, increasing in v), 2 = x_out (log2 of
// ceil(E / c), decreasing), 3 = both (log2 of the padded extent, increasing).

struct Expr {
  double c = 0;
  std::array<uint8_t, kMaxDims> mask{};
};

struct Constraint {
  Expr e;
  double sign = 1;  // +1: e >= rhs; -1: e <= rhs
  double rhs = 0;
};

using Values = std::array<int, kMaxDims>;

class Search {
 public:
  Search(const Graph& g, const PlanEndpoint& src, const PlanEndpoint& dst, const Box& bounds,
         uint64_t field_bytes)
      : g_(g), o_(g.options), src_(src), dst_(dst), bounds_(bounds), fb_(field_bytes) {}

  Result<Path> Run();

 private:
  struct PairModel {
    bool ready = false;
    bool shares_innermost = false;  // the common prefix is not empty
    Expr prefix, sbar;
    double max_prefix_bytes = 0;
    double min_sbar_log = 0;
  };

  double Term(int d, uint8_t mask, int v) const {
    const size_t dd = static_cast<size_t>(d), vv = static_cast<size_t>(v);
    return mask == 1 ? lin_[dd][vv] : mask == 2 ? lout_[dd][vv] : lboth_[dd][vv];
  }
  double Max(const Expr& e, const Values& lo, const Values& hi) const {
    double s = e.c;
    for (int d = 0; d < dims_; ++d) {
      const uint8_t m = e.mask[static_cast<size_t>(d)];
      if (m) s += Term(d, m, m == 2 ? lo[static_cast<size_t>(d)] : hi[static_cast<size_t>(d)]);
    }
    return s;
  }
  double Min(const Expr& e, const Values& lo, const Values& hi) const {
    double s = e.c;
    for (int d = 0; d < dims_; ++d) {
      const uint8_t m = e.mask[static_cast<size_t>(d)];
      if (m) s += Term(d, m, m == 2 ? hi[static_cast<size_t>(d)] : lo[static_cast<size_t>(d)]);
    }
    return s;
  }

  Expr MakeExpr(const Shape& ra, int from, int to) const;
  const PairModel& Pair(int a, int b);
  void PrepareVariables();
  void PrepareGraphBounds();
  bool Propagate(const Constraint* cs, int n, Values& lo, Values& hi) const;
  bool Solve(const Constraint* cs, int n, Values& lo, Values& hi) const;
  std::optional<Values> FeasibleAt(double tp, bool exact = true) const;
  Values UsedDomain() const;
  void Dfs(int m, int c, int depth, double bound);
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
  int dims_ = 0;
  int s_ = -1, d_ = -1;  // memory indices
  double log_fb_ = 0, log_th_ = 0;
  std::array<double, kMaxDims> log_extent_{};

  // Candidate layouts and their pairwise models.
  std::vector<Shape> cands_;
  int dst_cand_ = 0;
  std::vector<PairModel> pairs_;
  std::array<int, kMaxDims> vmax_{};
  std::array<std::array<double, kMaxVar + 1>, kMaxDims> lin_{}, lout_{}, lboth_{};

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

Expr Search::MakeExpr(const Shape& ra, int from, int to) const {
  Expr e;
  for (int i = from; i < to; ++i) {
    const Atom& x = ra[i];
    const size_t d = static_cast<size_t>(x.dim);
    switch (x.kind) {
      case AtomKind::kF:
        e.c += log_fb_;
        break;
      case AtomKind::kWhole:
        e.c += log_extent_[d];
        break;
      case AtomKind::kIn:
        if (x.block > 0)
          e.c += std::log2(static_cast<double>(x.block));
        else
          e.mask[d] |= 1;
        break;
      case AtomKind::kOut:
        if (x.block > 0) {
          e.c += std::log2(static_cast<double>(CeilDiv(static_cast<uint64_t>(bounds_.extent(x.dim)),
                                                       static_cast<uint64_t>(x.block))));
        } else {
          e.mask[d] |= 2;
        }
        break;
    }
  }
  return e;
}

const Search::PairModel& Search::Pair(int a, int b) {
  PairModel& p = pairs_[static_cast<size_t>(a) * cands_.size() + static_cast<size_t>(b)];
  if (p.ready) return p;
  const PairShape ps = AnalyzePair(cands_[static_cast<size_t>(a)], cands_[static_cast<size_t>(b)]);
  p.shares_innermost = ps.pf > 0;
  p.prefix = MakeExpr(ps.ra, 0, ps.pf);
  p.sbar = MakeExpr(ps.ra, 0, ps.sb);
  Values lo{}, hi = vmax_;
  p.max_prefix_bytes = std::exp2(Max(p.prefix, lo, hi)) * (1 + 1e-12);
  p.min_sbar_log = Min(p.sbar, lo, hi);
  p.ready = true;
  return p;
}

void Search::PrepareVariables() {
  for (int d = 0; d < dims_; ++d) {
    const size_t dd = static_cast<size_t>(d);
    const uint64_t e = static_cast<uint64_t>(bounds_.extent(d));
    log_extent_[dd] = std::log2(static_cast<double>(e));
    bool variable = false;
    for (const Shape& s : cands_) variable = variable || s.SplitBlock(d) == 0;
    if (!variable) continue;
    int v = 0;
    while (v < kMaxVar && (uint64_t{1} << v) < e) ++v;
    vmax_[dd] = v;
    for (int k = 0; k <= v; ++k) {
      const uint64_t c = static_cast<uint64_t>(BlockFor(k, static_cast<int64_t>(e)));
      const uint64_t outs = CeilDiv(e, c);
      const size_t kk = static_cast<size_t>(k);
      lin_[dd][kk] = std::log2(static_cast<double>(c));
      lout_[dd][kk] = std::log2(static_cast<double>(outs));
      lboth_[dd][kk] = std::log2(static_cast<double>(SatMul(c, outs)));
    }
  }
}

void Search::PrepareGraphBounds() {
  const size_t n = g_.topo.memories.size();
  // Stay on the endpoints' nodes when they can reach each other there.
  allowed_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    allowed_[i] = g_.node[i] == src_.memory.node || g_.node[i] == dst_.memory.node;
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
    if (!reached) allowed_.assign(n, 1);
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
    if (m < 0) break;
    done[static_cast<size_t>(m)] = 1;
    for (const Arc& a : g_.in[static_cast<size_t>(m)]) {
      const size_t f = static_cast<size_t>(a.to);
      if (!allowed_[f] || done[f]) continue;
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

// Bounds propagation over integer domains: each constraint sign * (sum of
// monotone terms) >= sign * rhs narrows every variable it mentions to the
// values that can still satisfy it given the others' best values.
bool Search::Propagate(const Constraint* cs, int n, Values& lo, Values& hi) const {
  for (int round = 0; round < 4 * (kMaxVar + 1); ++round) {
    bool changed = false;
    for (int k = 0; k < n; ++k) {
      const Constraint& c = cs[k];
      std::array<double, kMaxDims> best{};
      double total = c.sign * c.e.c;
      for (int d = 0; d < dims_; ++d) {
        const size_t dd = static_cast<size_t>(d);
        const uint8_t m = c.e.mask[dd];
        if (!m) continue;
        const bool increasing = (m != 2) == (c.sign > 0);
        best[dd] = c.sign * Term(d, m, increasing ? hi[dd] : lo[dd]);
        total += best[dd];
      }
      const double target = c.sign * c.rhs;
      if (total < target - kEps) return false;
      for (int d = 0; d < dims_; ++d) {
        const size_t dd = static_cast<size_t>(d);
        const uint8_t m = c.e.mask[dd];
        if (!m) continue;
        const double need = target - (total - best[dd]) - kEps;
        if ((m != 2) == (c.sign > 0)) {
          while (lo[dd] <= hi[dd] && c.sign * Term(d, m, lo[dd]) < need) {
            ++lo[dd];
            changed = true;
          }
        } else {
          while (hi[dd] >= lo[dd] && c.sign * Term(d, m, hi[dd]) < need) {
            --hi[dd];
            changed = true;
          }
        }
        if (lo[dd] > hi[dd]) return false;
      }
    }
    if (!changed) return true;
  }
  return true;
}

// Exact: propagation, then splitting the widest domain (smaller blocking
// factors first, which keeps buffers and chunks small).
bool Search::Solve(const Constraint* cs, int n, Values& lo, Values& hi) const {
  if (!Propagate(cs, n, lo, hi)) return false;
  int pick = -1;
  for (int d = 0; d < dims_; ++d) {
    const size_t dd = static_cast<size_t>(d);
    if (lo[dd] < hi[dd] && (pick < 0 || hi[dd] - lo[dd] > hi[static_cast<size_t>(pick)] -
                                                              lo[static_cast<size_t>(pick)])) {
      pick = d;
    }
  }
  if (pick < 0) return true;
  const size_t p = static_cast<size_t>(pick);
  const int mid = lo[p] + (hi[p] - lo[p]) / 2;
  Values lo2 = lo, hi2 = hi;
  hi2[p] = mid;
  if (Solve(cs, n, lo2, hi2)) {
    lo = lo2;
    hi = hi2;
    return true;
  }
  lo[p] = mid + 1;
  return Solve(cs, n, lo, hi);
}

// The domain of the blocking factors the partial path's constraints name:
// [0, vmax] for those, [0, 0] for the others.
Values Search::UsedDomain() const {
  Values hi{};
  for (const Hop& h : hops_list_) {
    for (int d = 0; d < dims_; ++d) {
      const size_t dd = static_cast<size_t>(d);
      if (h.pair->prefix.mask[dd] || (h.inner && h.pair->sbar.mask[dd])) hi[dd] = vmax_[dd];
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
    if (!r) return std::nullopt;
    if (h.touches_buffer && *r > o_.space_threshold) return std::nullopt;
    if (static_cast<double>(*r) > h.pair->max_prefix_bytes) return std::nullopt;
    if (*r > 1) cs.push_back({h.pair->prefix, 1, std::log2(static_cast<double>(*r))});
    if (h.inner) cs.push_back({h.pair->sbar, -1, log_th_});
  }
  Values lo{}, hi = UsedDomain();
  const int n = static_cast<int>(cs.size());
  if (!(exact ? Solve(cs.data(), n, lo, hi) : Propagate(cs.data(), n, lo, hi))) return std::nullopt;
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
    if (!l.ok()) return;  // cannot happen: candidates are valid layouts
    path.nodes.push_back({g_.topo.memories[static_cast<size_t>(mem_[ii])].id, *std::move(l)});
    if (i < hops) {
      edges.push_back(&g_.topo.edges[static_cast<size_t>(edge_[ii])]);
      path.edges.push_back(*edges.back());
    }
  }
  Result<Path> evaluated = Evaluate(std::move(path), edges, bounds_, fb_, o_);
  if (evaluated.ok()) Consider(*std::move(evaluated));
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
  if (x == yz.to) return false;
  const int xz = g_.EdgeIndex(x, yz.to);
  if (xz < 0) return false;
  const size_t e = static_cast<size_t>(xz);
  if (poor_rule_ && g_.edge_poor[e]) return false;
  const int c = g_.edge_curve[e];
  return g_.CurveAtLeast(c, g_.edge_curve[static_cast<size_t>(edge_xy)]) &&
         g_.CurveAtLeast(c, yz.curve);
}

// Depth-first over (memory, layout) pairs; paths of exactly hops_ hops.
void Search::Dfs(int m, int c, int depth, double bound) {
  if (Done()) return;
  if (depth == hops_) {
    if (m == d_ && c == dst_cand_) SolveLeaf(bound);
    return;
  }
  const int remaining = hops_ - depth;  // hops still to take, this one included
  const size_t mm = static_cast<size_t>(m);
  for (const Arc& a : g_.out[mm]) {
    const size_t t = static_cast<size_t>(a.to);
    if (!allowed_[t]) continue;
    const bool self = a.to == m;
    const bool last = remaining == 1;
    if (self) {
      if (self_used_[mm]) continue;
    } else if (visited_[t] && !(last && a.to == d_)) {
      continue;
    }
    if (last && a.to != d_) continue;
    if (!last) {
      if (dist_[t] > remaining - 1) continue;
      // At the destination early, only its self-loop can follow.
      if (a.to == d_ && (remaining - 1 != 1 || self || !g_.EdgeBetween(d_, d_))) continue;
    }
    if (depth >= 1 && Detour(mem_[static_cast<size_t>(depth - 1)], edge_.back(), a)) continue;
    double reach = std::min(bound, a.peak);
    if (!last) reach = std::min(reach, widest_[t]);
    if (reach < Threshold()) {
      Prune(reach);
      continue;
    }
    const TopologyEdge& e = g_.topo.edges[static_cast<size_t>(a.edge)];
    const bool from_inner = depth > 0, to_inner = !last;
    const int first = last ? dst_cand_ : 0;
    const int end = last ? dst_cand_ + 1 : static_cast<int>(cands_.size());
    for (int c2 = first; c2 < end; ++c2) {
      if (self && c2 == c) continue;  // a self-loop converts or is useless
      // Disk hops never convert (ConvertsLayout): a Memcpy hop beside them
      // does it with large disk requests; the caller may still force it.
      if (c2 != c && !ConvertsLayout(e.kind)) continue;
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
      if (from_inner && to_inner && p.min_sbar_log > log_th_ + kEps) continue;
      double req = p.max_prefix_bytes;
      if (from_inner || to_inner) req = std::min(req, static_cast<double>(o_.space_threshold));
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
      if (self) self_used_[mm] = 1;
      visited_[t] = 1;
      Dfs(a.to, c2, depth + 1, next);
      visited_[t] = was_visited;
      if (self) self_used_[mm] = 0;
      mem_.pop_back();
      cand_.pop_back();
      edge_.pop_back();
      hops_list_.pop_back();
      if (Done()) return;
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
    if (best_ >= tau_ || max_pruned_ <= floor || tau_ <= floor) break;
    tau_ = std::max(floor, 0.5 * std::min(max_pruned_, tau_));
  }
}

Result<Path> Search::Run() {
  ISO_RETURN_IF_ERROR(ValidateRequest(bounds_, fb_));
  ISO_RETURN_IF_ERROR(ValidateLayout(src_.layout, bounds_, "source"));
  ISO_RETURN_IF_ERROR(ValidateLayout(dst_.layout, bounds_, "destination"));
  s_ = g_.Index(src_.memory);
  d_ = g_.Index(dst_.memory);
  if (s_ < 0) return NotFound("unknown memory ", ToString(src_.memory));
  if (d_ < 0) return NotFound("unknown memory ", ToString(dst_.memory));
  dims_ = bounds_.dims;
  log_fb_ = std::log2(static_cast<double>(fb_));
  log_th_ = std::log2(static_cast<double>(std::max<uint64_t>(o_.space_threshold, 1)));

  cands_ = CandidateShapes(ShapeOf(src_.layout), ShapeOf(dst_.layout), dims_);
  dst_cand_ = cands_.size() > 1 ? 1 : 0;
  pairs_.assign(cands_.size() * cands_.size(), PairModel{});
  PrepareVariables();
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
      Result<Path> evaluated = Evaluate(*std::move(simple), edges, bounds_, fb_, o_);
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

}  // namespace full_planner_internal

using full_planner_internal::Graph;

struct FullPlanner::Graph : full_planner_internal::Graph {
  using full_planner_internal::Graph::Graph;
};

namespace {

// EvaluatePath with a way to find the channel between two memories.
template <typename FindEdge>
Result<Path> EvaluateWith(FindEdge find, Path path, const Box& bounds, uint64_t field_bytes,
                          const FullPlannerOptions& options) {
  using namespace full_planner_internal;
  ISO_RETURN_IF_ERROR(ValidateRequest(bounds, field_bytes));
  if (path.nodes.size() < 2 || path.edges.size() + 1 != path.nodes.size()) {
    return InvalidArgument("path: ", path.nodes.size(), " memories and ", path.edges.size(),
                           " hops; a path has at least one hop and one memory more than hops");
  }
  for (const PathNode& n : path.nodes) {
    ISO_RETURN_IF_ERROR(ValidateLayout(n.layout, bounds, "path"));
  }
  std::vector<const TopologyEdge*> edges;
  for (size_t h = 0; h < path.edges.size(); ++h) {
    const MemoryId a = path.nodes[h].memory, b = path.nodes[h + 1].memory;
    const TopologyEdge* e = find(a, b);
    if (!e) {
      return FailedPrecondition("connectivity: hop ", h, " has no channel from ", ToString(a),
                                " to ", ToString(b));
    }
    if (!(path.edges[h].src == a) || !(path.edges[h].dst == b)) {
      return InvalidArgument("path: hop ", h, " names the channel ", ToString(path.edges[h].src),
                             " -> ", ToString(path.edges[h].dst), " but joins ", ToString(a),
                             " and ", ToString(b));
    }
    edges.push_back(e);
  }
  return Evaluate(std::move(path), edges, bounds, field_bytes, options);
}

}  // namespace

Result<Path> EvaluatePath(const Topology& topo, Path path, const Box& bounds, uint64_t field_bytes,
                          const FullPlannerOptions& options) {
  return EvaluateWith([&topo](MemoryId a, MemoryId b) { return topo.FindEdge(a, b); },
                      std::move(path), bounds, field_bytes, options);
}

std::vector<Layout> CandidateLayouts(const Layout& src, const Layout& dst, const Box& bounds,
                                     const std::array<int64_t, kMaxDims>& blocks) {
  using namespace full_planner_internal;
  std::array<int64_t, kMaxDims> clamped{};
  for (int d = 0; d < bounds.dims && d < kMaxDims; ++d) {
    const size_t dd = static_cast<size_t>(d);
    clamped[dd] = std::clamp<int64_t>(blocks[dd], 1, std::max<int64_t>(bounds.extent(d), 1));
  }
  std::vector<Layout> out;
  if (src.dims() != bounds.dims || dst.dims() != bounds.dims) return out;
  for (const Shape& s : CandidateShapes(ShapeOf(src), ShapeOf(dst), bounds.dims)) {
    if (Result<Layout> l = Concretize(s, clamped, bounds.dims); l.ok()) out.push_back(*l);
  }
  return out;
}

FullPlanner::FullPlanner(Topology topo, FullPlannerOptions options)
    : graph_(std::make_unique<const Graph>(std::move(topo), options)) {}
FullPlanner::~FullPlanner() = default;
FullPlanner::FullPlanner(FullPlanner&&) noexcept = default;
FullPlanner& FullPlanner::operator=(FullPlanner&&) noexcept = default;

Result<Path> FullPlanner::Plan(const PlanEndpoint& src, const PlanEndpoint& dst, const Box& bounds,
                               uint64_t field_bytes) const {
  full_planner_internal::Search search(*graph_, src, dst, bounds, field_bytes);
  return search.Run();
}

Result<Path> FullPlanner::Evaluate(Path path, const Box& bounds, uint64_t field_bytes) const {
  const Graph& g = *graph_;
  return EvaluateWith(
      [&g](MemoryId a, MemoryId b) -> const TopologyEdge* {
        const int s = g.Index(a), d = g.Index(b);
        return s >= 0 && d >= 0 ? g.EdgeBetween(s, d) : nullptr;
      },
      std::move(path), bounds, field_bytes, g.options);
}

Result<Path> FullPlanner::Simple(const PlanEndpoint& src, const PlanEndpoint& dst) const {
  return graph_->Simple(src, dst);
}

const Topology& FullPlanner::topology() const { return graph_->topo; }
const FullPlannerOptions& FullPlanner::options() const { return graph_->options; }

Result<Path> PlanFull(const Topology& topo, const PlanEndpoint& src, const PlanEndpoint& dst,
                      const Box& bounds, uint64_t field_bytes, const FullPlannerOptions& options) {
  return FullPlanner(topo, options).Plan(src, dst, bounds, field_bytes);
}

}  // namespace isometry
