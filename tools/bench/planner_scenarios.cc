#include "tools/bench/planner_scenarios.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "planner/planner.h"
#include "planner/testing/synthetic_graphs.h"

namespace isometry::bench {

namespace {

using Clock = std::chrono::steady_clock;

struct Transfer {
  const char* name;
  PlanEndpoint src, dst;
  Box bounds;
  uint64_t field_bytes;
};

// Microseconds per call of `plan`, the median of `rounds` batches of at
// least 20 ms (and 10 calls) each.
template <typename F>
double MicrosPerPlan(int rounds, F&& plan) {
  std::vector<double> per_batch;
  for (int r = 0; r < rounds; ++r) {
    int calls = 0;
    const auto t0 = Clock::now();
    std::chrono::duration<double> elapsed{};
    do {
      plan();
      ++calls;
      elapsed = Clock::now() - t0;
    } while (calls < 10 || elapsed.count() < 0.02);
    per_batch.push_back(elapsed.count() * 1e6 / static_cast<double>(calls));
  }
  return MedianOf(per_batch);
}

// Planner::Plan, the call the runtime makes (it copies the path out).
void MustPlan(Planner& p, const Transfer& t) {
  Result<Path> r = p.Plan(t.src, t.dst, t.bounds, t.field_bytes);
  if (!r.ok()) {
    std::fprintf(stderr, "planning %s failed: %s\n", t.name, r.status().ToString().c_str());
    // A benchmark that cannot go on ends the process; the rows so far are
    // void and no state needs an orderly shutdown.
    std::exit(1);  // NOLINT(concurrency-mt-unsafe)
  }
}

// The targets: the simple algorithm within 10 us up to 16 nodes, the full
// one within 100 us up to 64; larger clusters report how planning time
// grows (to 256 nodes), beside the same bound.
std::string Target(const char* algorithm, uint32_t nodes, const char* bound) {
  const uint32_t at = std::string(algorithm) == "simple" ? 16 : 64;
  return nodes <= at ? std::string("<= ") + bound : std::string("report (") + bound + ")";
}

}  // namespace

void RunPlanning(int rounds, Report& report) {
  for (uint32_t nodes : {2u, 16u, 64u, 256u}) {
    const Topology topo = PaperGraph(nodes);
    const uint32_t last = nodes - 1;
    const Transfer transfers[] = {
        {"1d",
         {PaperMemoryId(0, PaperMemory::kFbm), Layout::Aos(1)},
         {PaperMemoryId(last, PaperMemory::kFbm), Layout::Soa(1)},
         Box::FromExtents({4 << 20}),
         32},
        {"2d",
         {PaperMemoryId(0, PaperMemory::kFbm), Layout::RowMajor(2)},
         {PaperMemoryId(last, PaperMemory::kFbm), Layout::ColumnMajor(2)},
         Box::FromExtents({4096, 4096}),
         16},
    };
    for (const Transfer& t : transfers) {
      const std::string scenario =
          "planning_" + std::string(t.name) + "_" + std::to_string(nodes) + "node";
      PlannerOptions uncached;
      uncached.cache_capacity = 0;
      uncached.full_threshold = UINT64_MAX;  // always simple
      Planner simple(topo, uncached);
      uncached.full_threshold = 0;  // always full
      Planner full(topo, uncached);
      Planner cached(topo);
      // Two boxes of one cache key (the same extents, moved by one):
      // alternated, each call finds the thread's last plan to be the
      // other's, so the cache answers it (cache_hit); the same request
      // again is answered from the thread's last plan (repeat).
      Transfer twin = t;
      for (int d = 0; d < twin.bounds.dims; ++d) {
        ++twin.bounds.lo[d];
        ++twin.bounds.hi[d];
      }
      MustPlan(cached, t);  // the misses that fill the cache
      MustPlan(cached, twin);

      const double simple_us = MicrosPerPlan(rounds, [&] { MustPlan(simple, t); });
      const double full_us = MicrosPerPlan(rounds, [&] { MustPlan(full, t); });
      bool flip = false;
      const double hit_us = MicrosPerPlan(rounds, [&] {
        flip = !flip;
        MustPlan(cached, flip ? twin : t);
      });
      const double repeat_us = MicrosPerPlan(rounds, [&] { MustPlan(cached, t); });
      for (Row row :
           {Row{scenario, "simple", simple_us, "us", "target", 10, 10 / simple_us,
                Target("simple", nodes, "10 us")},
            Row{scenario, "full", full_us, "us", "target", 100, 100 / full_us,
                Target("full", nodes, "100 us")},
            Row{scenario, "cache_hit", hit_us, "us", "target", 1, 1 / hit_us, "<= 1 us"},
            Row{scenario, "repeat", repeat_us, "us", "target", 1, 1 / repeat_us, "report"}}) {
        row.predicted.note = "no plan: a planning-time row (median of the rounds' batches)";
        report.Add(std::move(row));
      }
    }
  }
}

}  // namespace isometry::bench
