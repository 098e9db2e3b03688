// Properties of the full path planner (Isometry §4.2) on random graphs:
// every path meets the constraints and beats the simple algorithm, and on
// small graphs it matches an exhaustive search of its space.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <random>
#include <set>

#include "planner/full_planner.h"
#include "planner/planner.h"
#include "planner/testing/synthetic_graphs.h"
#include "unit/full_planner_checks.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;

namespace {

ThroughputFunction RandomTp(std::mt19937_64& rng) {
  const double peak = std::exp2(std::uniform_real_distribution<double>(27, 34)(rng));
  switch (rng() % 4) {
    case 0:
      return ThroughputFunction::Constant(peak);
    case 1: {
      std::vector<ThroughputSample> s;
      s.reserve(6);
      for (int k = 0; k < 6; ++k) {  // non-monotone on purpose
        s.push_back({uint64_t{1} << (rng() % 30),
                     peak * std::uniform_real_distribution<double>(0.01, 1)(rng)});
      }
      return *ThroughputFunction::FromSamples(std::move(s));
    }
    default: {
      static constexpr double kOverheads[] = {1e-8, 1e-7, 1e-6, 1e-5, 1e-4};
      return ThroughputFunction::PerRequestOverhead(peak, kOverheads[rng() % 5]);
    }
  }
}

// Random transfer graphs: `nodes` nodes of `per_node` memories, random
// channels (self-loops too) with random throughput functions, drawn from
// `pool` when it is not empty (shared functions make detours comparable).
// Host memories get a Memcpy self-loop often, so the simple planner can
// convert.
Topology RandomGraph(std::mt19937_64& rng, uint32_t nodes, uint32_t per_node, double density,
                     const std::vector<ThroughputFunction>& pool = {}) {
  static constexpr MemoryKind kKinds[] = {MemoryKind::kSys, MemoryKind::kReg, MemoryKind::kZcm,
                                          MemoryKind::kFbm, MemoryKind::kDsk};
  Topology t;
  for (uint32_t n = 0; n < nodes; ++n) {
    for (uint32_t i = 0; i < per_node; ++i) {
      t.memories.push_back({{n, i}, kKinds[rng() % 5], StrCat("m", n, ".", i)});
    }
  }
  std::uniform_real_distribution<double> u(0, 1);
  for (const TopologyMemory& a : t.memories) {
    for (const TopologyMemory& b : t.memories) {
      const bool host_self = a.id == b.id && IsHostMemory(a.kind);
      if (!(host_self ? u(rng) < 0.8 : u(rng) < density)) continue;
      ChannelKind kind = ChannelKind::kGpuCopy;
      if (IsHostMemory(a.kind) && IsHostMemory(b.kind) && a.id.node == b.id.node) {
        kind = ChannelKind::kMemcpy;
      }
      if (a.id.node != b.id.node) kind = ChannelKind::kRemoteMemcpy;
      t.edges.push_back({a.id, b.id, static_cast<int>(t.edges.size()), kind,
                         StrCat("c", t.edges.size()),
                         pool.empty() ? RandomTp(rng) : pool[rng() % pool.size()]});
      t.edges.back().traits = PaperTraits(kind);
    }
  }
  return t;
}

Layout RandomLayout(std::mt19937_64& rng, int dims, const Box& b) {
  const int64_t fast = std::max<int64_t>(1, b.extent(dims - 1) / 3);
  switch (rng() % 5) {
    case 0:
      return Layout::RowMajor(dims);
    case 1:
      return Layout::ColumnMajor(dims);
    case 2:
      return Layout::Soa(dims);
    case 3:
      return *Layout::Hybrid(dims, std::min<int64_t>(fast, 16));
    default: {
      std::vector<int64_t> blocks;
      blocks.reserve(static_cast<size_t>(dims));
      for (int d = 0; d < dims; ++d) blocks.push_back(1 + static_cast<int64_t>(rng() % 8));
      return *Layout::Blocked(blocks);
    }
  }
}

struct Request {
  PlanEndpoint src, dst;
  Box bounds;
  uint64_t fb;
};

Request RandomRequest(std::mt19937_64& rng, const Topology& t, int64_t max_extent) {
  Request r;
  const int dims = 1 + static_cast<int>(rng() % 2);
  r.bounds.dims = dims;
  for (int d = 0; d < dims; ++d) {
    r.bounds.hi[d] = rng() % 2
                         ? int64_t{1} << (rng() % 12)
                         : 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(max_extent));
    r.bounds.hi[d] = std::min(r.bounds.hi[d], max_extent);
  }
  static constexpr uint64_t kFb[] = {1, 4, 8, 16, 32, 100};
  r.fb = kFb[rng() % 6];
  r.src = {t.memories[rng() % t.memories.size()].id, RandomLayout(rng, dims, r.bounds)};
  r.dst = {t.memories[rng() % t.memories.size()].id, RandomLayout(rng, dims, r.bounds)};
  if (rng() % 4 == 0) r.dst.layout = r.src.layout;
  return r;
}

}  // namespace

TEST_CASE("full planner property: every path meets §4.2's constraints and beats simple") {
  std::mt19937_64 rng(20180612);
  static constexpr uint64_t kTh[] = {4096, 65536, 1 << 20, 32 << 20};
  int planned = 0, compared = 0, strictly_better = 0;
  for (int iter = 0; iter < 300; ++iter) {
    const uint32_t nodes = 1 + static_cast<uint32_t>(rng() % 2);
    const uint32_t per_node = 2 + static_cast<uint32_t>(rng() % 4);
    const Topology t = RandomGraph(rng, nodes, per_node, 0.45);
    const Request r = RandomRequest(rng, t, 5000);
    FullPlannerOptions o;
    o.space_threshold = kTh[rng() % 4];
    INFO("iteration " << iter << ": " << r.src.layout.ToString() << " -> "
                      << r.dst.layout.ToString() << " over " << ToString(r.bounds)
                      << " |F|=" << r.fb << " TH=" << o.space_threshold);
    Result<Path> full = PlanFull(t, r.src, r.dst, r.bounds, r.fb, o);
    Result<Path> simple = PlanSimple(t, r.src, r.dst);
    // The planner's indexed copy of the simple algorithm agrees exactly.
    Result<Path> indexed = FullPlanner(t, o).Simple(r.src, r.dst);
    CHECK(indexed.status() == simple.status());
    if (indexed.ok() && simple.ok()) CHECK(*indexed == *simple);
    const double simple_bps = simple.ok() ? ModelBps(t, *simple, r.bounds, r.fb, o) : 0;
    if (simple_bps > 0) {
      // A simple path the model accepts exists: the full planner must find
      // one at least as fast.
      INFO(simple->ToString(t) << " / full: " << full.status().ToString());
      REQUIRE(full.ok());
      ++compared;
      CHECK(full->predicted_bps >= simple_bps);
      strictly_better += full->predicted_bps > simple_bps * 1.01;
    }
    if (!full.ok()) {
      CHECK((absl::IsNotFound(full.status()) || absl::IsFailedPrecondition(full.status())));
      continue;
    }
    ++planned;
    INFO(full->ToString(t));
    CHECK(CheckConstraints(t, *full, r.src, r.dst, r.bounds, r.fb, o.space_threshold) == "");
    CHECK(static_cast<int>(full->edges.size()) <=
          std::max(o.max_hops, simple.ok() ? static_cast<int>(simple->edges.size()) : 0));
    // The estimates are the model's, and planning is deterministic.
    CHECK(ModelBps(t, *full, r.bounds, r.fb, o) == full->predicted_bps);
    Result<Path> again = PlanFull(t, r.src, r.dst, r.bounds, r.fb, o);
    REQUIRE(again.ok());
    CHECK(*again == *full);
  }
  INFO("planned " << planned << ", compared " << compared << ", strictly better "
                  << strictly_better);
  CHECK(planned > 100);
  CHECK(compared > 50);
  CHECK(strictly_better > 5);
}

namespace {

// Exhaustive search of the same space: every acyclic memory path up to
// max_hops, every candidate layout per intermediate, every power-of-two
// blocking factor per dimension; the best model throughput.
double BruteForce(const Topology& t, const Request& r, const FullPlannerOptions& o) {
  double best = 0;
  std::vector<MemoryId> mems{r.src.memory};
  std::vector<int64_t> choices[kMaxDims];
  for (int d = 0; d < kMaxDims; ++d) {
    const int64_t e = d < r.bounds.dims ? r.bounds.extent(d) : 1;
    for (int64_t c = 1;; c *= 2) {
      choices[d].push_back(std::min(c, e));
      if (c >= e) break;
    }
  }
  auto layouts_for = [&](const std::array<int64_t, kMaxDims>& blocks,
                         const std::vector<MemoryId>& path) {
    const std::vector<Layout> cands =
        CandidateLayouts(r.src.layout, r.dst.layout, r.bounds, blocks);
    const size_t inner = path.size() - 2;
    std::vector<size_t> pick(inner, 0);
    while (true) {
      Path p;
      p.nodes.push_back({path[0], r.src.layout});
      for (size_t i = 0; i < inner; ++i) p.nodes.push_back({path[i + 1], cands[pick[i]]});
      p.nodes.push_back({path.back(), r.dst.layout});
      for (size_t i = 0; i + 1 < path.size(); ++i) {
        p.edges.push_back(*t.FindEdge(path[i], path[i + 1]));
      }
      best = std::max(best, ModelBps(t, p, r.bounds, r.fb, o));
      size_t k = 0;
      while (k < inner && ++pick[k] == cands.size()) pick[k++] = 0;
      if (k == inner) break;
    }
  };
  auto evaluate = [&]() {
    std::array<size_t, kMaxDims> idx{};
    while (true) {
      std::array<int64_t, kMaxDims> blocks{};
      for (int d = 0; d < kMaxDims; ++d) blocks[d] = choices[d][idx[d]];
      layouts_for(blocks, mems);
      int d = 0;
      while (d < kMaxDims && ++idx[d] == choices[d].size()) idx[d++] = 0;
      if (d == kMaxDims) break;
    }
  };
  const bool round_trip = r.src.memory == r.dst.memory;
  std::function<void()> dfs = [&]() {
    const MemoryId m = mems.back();
    const size_t k = mems.size() - 1;  // hops so far
    const bool self_looped = k >= 1 && mems[k - 1] == m;
    if (k >= 1 && m == r.dst.memory) {
      evaluate();
      // Only the destination's own self-loop may follow.
      if (!round_trip && !self_looped && static_cast<int>(k) < o.max_hops && t.FindEdge(m, m)) {
        mems.push_back(m);
        evaluate();
        mems.pop_back();
      }
      return;
    }
    if (static_cast<int>(k) >= o.max_hops) return;
    for (const TopologyEdge& e : t.edges) {
      if (!(e.src == m) || t.FindEdge(e.src, e.dst) != &e) continue;
      if (e.dst == m) {
        if (self_looped) continue;  // a self-loop at most once
      } else if (std::find(mems.begin(), mems.end(), e.dst) != mems.end() &&
                 !(round_trip && e.dst == r.dst.memory)) {
        continue;  // acyclic
      }
      mems.push_back(e.dst);
      dfs();
      mems.pop_back();
    }
  };
  dfs();
  return best;
}

}  // namespace

TEST_CASE("full planner property: matches an exhaustive search of its space on small graphs") {
  std::mt19937_64 rng(4242);
  int nontrivial = 0;
  int with_pool = 0;
  for (int iter = 0; iter < 80; ++iter) {
    // Half the graphs share two or three functions among all their
    // channels: then direct hops dominate detours and the detour rule acts.
    std::vector<ThroughputFunction> pool;
    if (iter % 2) {
      for (size_t k = 0; k < 2 + rng() % 2; ++k) pool.push_back(RandomTp(rng));
      ++with_pool;
    }
    const Topology t = RandomGraph(rng, 1, 3 + static_cast<uint32_t>(rng() % 2), 0.6, pool);
    Request r = RandomRequest(rng, t, 40);
    FullPlannerOptions o;
    o.max_hops = 3 + iter % 2;
    o.stop_fraction = 1.0;  // no early exit: the search must be exact
    o.poor_fraction = 0;    // no small-request pruning: a heuristic, not exact
    o.space_threshold = uint64_t{64} << (rng() % 8);
    INFO("iteration " << iter << ": " << r.src.layout.ToString() << " -> "
                      << r.dst.layout.ToString() << " over " << ToString(r.bounds)
                      << " |F|=" << r.fb << " TH=" << o.space_threshold);
    const double brute = BruteForce(t, r, o);
    Result<Path> full = PlanFull(t, r.src, r.dst, r.bounds, r.fb, o);
    if (brute == 0) {
      CHECK_FALSE(full.ok());
      continue;
    }
    REQUIRE(full.ok());
    INFO(full->ToString(t));
    ++nontrivial;
    INFO("model of the returned path: " << ModelBps(t, *full, r.bounds, r.fb, o));
    // Within the binary search's resolution and the tie margin.
    CHECK(full->predicted_bps >= brute * (1 - 2e-3));
    CHECK(full->predicted_bps <= brute * (1 + 1e-9));
  }
  CHECK(nontrivial > 20);
}

TEST_CASE("full planner property: the indexed simple algorithm agrees on a 32-node mesh") {
  // The indexed search stops when it enqueues a memory with a channel to
  // the destination; PlanSimple when it dequeues one: the same path.
  const Topology t = PaperGraph(32);
  const FullPlanner planner(t);
  std::mt19937_64 rng(20261202);
  for (int i = 0; i < 40; ++i) {
    const MemoryId src = t.memories[rng() % t.memories.size()].id;
    const MemoryId dst = t.memories[rng() % t.memories.size()].id;
    const PlanEndpoint s{src, Layout::Aos(1)}, d{dst, i % 2 ? Layout::Soa(1) : Layout::Aos(1)};
    INFO(t.NameOf(src) << " -> " << t.NameOf(dst));
    Result<Path> simple = PlanSimple(t, s, d);
    Result<Path> indexed = planner.Simple(s, d);
    CHECK(indexed.status() == simple.status());
    if (indexed.ok() && simple.ok()) CHECK(*indexed == *simple);
  }
}

}  // namespace ISOMETRY_TEST_FILE
