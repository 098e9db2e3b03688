// The plan cache and the planner facade: keys, counters, eviction, threads,
// the size threshold between the simple and full algorithms, and that a
// cached plan equals a fresh one.
#include "planner/plan_cache.h"

#include <catch2/catch.hpp>
#include <random>
#include <thread>

#include "core/field_space.h"
#include "planner/planner.h"
#include "planner/testing/synthetic_graphs.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

PlanEndpoint At(uint32_t node, PaperMemory m, Layout l) {
  return {PaperMemoryId(node, m), std::move(l)};
}

Path SomePath(int tag) {
  Path p;
  p.nodes = {{{0, 0}, Layout::Aos(1)}, {{0, 1}, Layout::Aos(1)}};
  p.edges.resize(1);
  p.algorithm = StrCat("tag", tag);
  return p;
}

}  // namespace

TEST_CASE("plan cache: keys by memories, layouts and size class") {
  const PlanEndpoint a = At(0, PaperMemory::kSys, Layout::Aos(1));
  const PlanEndpoint b = At(1, PaperMemory::kSys, Layout::Soa(1));
  const PlanKey k = PlanKey::Make(a, b, Box::FromExtents({1000}), 8);
  CHECK(k.size_class == 12);  // 8000 bytes
  // Same class: 5000 x 8 lies in [2^15, 2^16) ... and 4200 x 8 too.
  CHECK(PlanKey::Make(a, b, Box::FromExtents({5000}), 8) ==
        PlanKey::Make(a, b, Box::FromExtents({4200}), 8));
  CHECK_FALSE(PlanKey::Make(a, b, Box::FromExtents({5000}), 8) ==
              PlanKey::Make(a, b, Box::FromExtents({9000}), 8));
  CHECK_FALSE(k == PlanKey::Make(b, a, Box::FromExtents({1000}), 8));
  CHECK_FALSE(
      k == PlanKey::Make(a, At(1, PaperMemory::kSys, Layout::Aos(1)), Box::FromExtents({1000}), 8));
  // Same bytes, different shape: different keys (blocking factors differ).
  const PlanEndpoint a2 = At(0, PaperMemory::kSys, Layout::RowMajor(2));
  const PlanEndpoint b2 = At(1, PaperMemory::kSys, Layout::ColumnMajor(2));
  CHECK_FALSE(PlanKey::Make(a2, b2, Box::FromExtents({64, 4096}), 8) ==
              PlanKey::Make(a2, b2, Box::FromExtents({4096, 64}), 8));
  CHECK(PlanKey::Make(a, b, Box::FromExtents({0}), 8).size_class == -1);
  CHECK(PlanKeyHash{}(k) == PlanKeyHash{}(PlanKey::Make(a, b, Box::FromExtents({1000}), 8)));
}

TEST_CASE("plan cache: hits, misses and least-recently-used eviction") {
  PlanCache cache(2);
  const PlanEndpoint a = At(0, PaperMemory::kSys, Layout::Aos(1));
  auto key = [&](int64_t n) { return PlanKey::Make(a, a, Box::FromExtents({n}), 1); };
  CHECK(cache.Find(key(1)) == nullptr);
  CHECK(cache.misses() == 1);
  cache.Insert(key(1), SomePath(1));
  cache.Insert(key(2), SomePath(2));
  REQUIRE(cache.Find(key(1)) != nullptr);  // 1 is now the most recent
  CHECK(cache.Find(key(1))->algorithm == "tag1");
  cache.Insert(key(4), SomePath(4));  // evicts 2
  CHECK(cache.size() == 2);
  CHECK(cache.Find(key(2)) == nullptr);
  CHECK(cache.Find(key(4))->algorithm == "tag4");
  cache.Insert(key(4), SomePath(5));  // replaces
  CHECK(cache.Find(key(4))->algorithm == "tag5");
  CHECK(cache.hits() == 4);
  CHECK(cache.misses() == 2);
  // bytes follows inserts, replacements and evictions exactly.
  const uint64_t each = PlanCache::FootprintOf(key(1), SomePath(1));
  CHECK(each > sizeof(PlanKey));
  CHECK(cache.bytes() ==
        PlanCache::FootprintOf(key(1), SomePath(1)) + PlanCache::FootprintOf(key(4), SomePath(5)));
  cache.Clear();
  CHECK(cache.size() == 0);
  CHECK(cache.bytes() == 0);
  PlanCache off(0);
  off.Insert(key(1), SomePath(1));
  CHECK(off.Find(key(1)) == nullptr);
}

TEST_CASE("plan cache: concurrent finds and inserts keep exact counters") {
  PlanCache cache(64);
  const PlanEndpoint a = At(0, PaperMemory::kSys, Layout::Aos(1));
  constexpr int kThreads = 4, kOps = 5000;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t));
      for (int i = 0; i < kOps; ++i) {
        const PlanKey k =
            PlanKey::Make(a, a, Box::FromExtents({int64_t{1} << (rng() % 100 % 40)}), 1);
        if (auto p = cache.Find(k)) {
          CHECK(p->nodes.size() == 2);
        } else {
          cache.Insert(k, SomePath(i));
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(cache.hits() + cache.misses() == uint64_t{kThreads} * kOps);
  CHECK(cache.size() <= 64);
}

TEST_CASE("planner: simple below the size threshold, full at and above it") {
  Planner planner(PaperGraph(2));
  const PlanEndpoint src = At(0, PaperMemory::kSys, Layout::Aos(1));
  const PlanEndpoint dst = At(1, PaperMemory::kSys, Layout::Aos(1));
  const int64_t threshold_points = static_cast<int64_t>(16 * kMiB / 8);
  Result<Path> small = planner.Plan(src, dst, Box::FromExtents({threshold_points - 1}), 8);
  REQUIRE(small.ok());
  CHECK(small->algorithm == "simple");
  CHECK(small->predicted_bps > 0);  // estimates filled for simple paths too
  Result<Path> large = planner.Plan(src, dst, Box::FromExtents({threshold_points}), 8);
  REQUIRE(large.ok());
  CHECK(large->algorithm == "full");
  CHECK(large->predicted_bps > small->predicted_bps);  // fig. 10: REG staging
  PlannerStats s = planner.stats();
  CHECK(s.simple_plans == 1);
  CHECK(s.full_plans == 1);
  CHECK(s.cache_misses == 2);
  CHECK(s.cache_hits == 0);
  // Same memories, layouts and size class: a hit, equal to the first plan.
  Result<Path> again = planner.Plan(src, dst, Box::FromExtents({threshold_points + 1000}), 8);
  REQUIRE(again.ok());
  CHECK(*again == *large);
  s = planner.stats();
  CHECK(s.cache_hits == 1);
  CHECK(s.full_plans == 1);
  // Errors are counted and not cached.
  CHECK_FALSE(planner.Plan({{9, 9}, Layout::Aos(1)}, dst, Box::FromExtents({8}), 8).ok());
  CHECK_FALSE(planner.Plan(src, dst, Box::FromExtents({8, 8}), 8).ok());
  CHECK(planner.stats().failures == 2);
  // A custom threshold.
  PlannerOptions o;
  o.full_threshold = 1024;
  Planner eager(PaperGraph(2), o);
  CHECK(eager.Plan(src, dst, Box::FromExtents({128}), 8)->algorithm == "full");
  CHECK(eager.Plan(src, dst, Box::FromExtents({127}), 8)->algorithm == "simple");
}

TEST_CASE("planner: a thread's repeated request is answered by identity, counted as a hit") {
  Planner planner(PaperGraph(2));
  const PlanEndpoint src = At(0, PaperMemory::kSys, Layout::Aos(1));
  const PlanEndpoint dst = At(0, PaperMemory::kSys, Layout::Soa(1));
  const Box box = Box::FromExtents({512});
  auto first = planner.PlanShared(src, dst, box, 8, 8);
  REQUIRE(first.ok());
  auto again = planner.PlanShared(src, dst, box, 8, 8);
  REQUIRE(again.ok());
  CHECK(again->get() == first->get());
  CHECK(planner.stats().cache_hits == 1);
  CHECK(planner.stats().cache_misses == 1);
  // Equal layouts made apart (other lists) go through the cache: the same plan.
  auto equal =
      planner.PlanShared({src.memory, Layout::Aos(1)}, {dst.memory, Layout::Soa(1)}, box, 8, 8);
  REQUIRE(equal.ok());
  CHECK(equal->get() == first->get());
  CHECK(planner.stats().cache_hits == 2);
  // Another box, or bounds that are not valid, are never answered from it.
  CHECK_FALSE(planner.PlanShared(src, dst, Box::FromExtents({8, 8}), 8, 8).ok());
  auto other_size = planner.PlanShared(src, dst, Box::FromExtents({1 << 24}), 8, 8);
  REQUIRE(other_size.ok());
  CHECK(planner.stats().cache_misses == 2);
  // Another planner plans afresh; one without a cache plans every request.
  Planner other(PaperGraph(2));
  REQUIRE(other.PlanShared(src, dst, box, 8, 8).ok());
  CHECK(other.stats().cache_misses == 1);
  PlannerOptions none;
  none.cache_capacity = 0;
  Planner uncached(PaperGraph(2), none);
  REQUIRE(uncached.PlanShared(src, dst, box, 8, 8).ok());
  REQUIRE(uncached.PlanShared(src, dst, box, 8, 8).ok());
  CHECK(uncached.stats().cache_hits == 0);
  CHECK(uncached.stats().simple_plans == 2);
}

TEST_CASE("planner property: a cached plan equals a fresh one") {
  const Topology t = PaperGraph(3);
  Planner cached(t);
  std::mt19937_64 rng(99);
  static constexpr PaperMemory kMems[] = {PaperMemory::kSys, PaperMemory::kReg, PaperMemory::kZcm,
                                          PaperMemory::kFbm, PaperMemory::kDsk};
  struct Req {
    PlanEndpoint src, dst;
    Box bounds;
    uint64_t fb;
  };
  std::vector<Req> reqs;
  for (int i = 0; i < 40; ++i) {
    const int dims = 1 + static_cast<int>(rng() % 2);
    Box b;
    b.dims = dims;
    for (int d = 0; d < dims; ++d) b.hi[d] = int64_t{1} << (4 + rng() % (dims == 1 ? 22 : 11));
    const Layout ls = rng() % 2 ? Layout::RowMajor(dims) : Layout::Soa(dims);
    const Layout ld = rng() % 2 ? Layout::ColumnMajor(dims) : ls;
    const auto src_node = static_cast<uint32_t>(rng() % 3);
    const PaperMemory src_mem = kMems[rng() % 5];
    const auto dst_node = static_cast<uint32_t>(rng() % 3);
    const PaperMemory dst_mem = kMems[rng() % 5];
    reqs.push_back(
        {At(src_node, src_mem, ls), At(dst_node, dst_mem, ld), b, uint64_t{4} << (rng() % 3)});
  }
  for (int round = 0; round < 2; ++round) {
    for (const Req& r : reqs) {
      Result<Path> c = cached.Plan(r.src, r.dst, r.bounds, r.fb);
      Planner fresh_planner(t);
      Result<Path> fresh = fresh_planner.Plan(r.src, r.dst, r.bounds, r.fb);
      REQUIRE(c.ok() == fresh.ok());
      if (c.ok()) CHECK(*c == *fresh);
    }
  }
  const PlannerStats s = cached.stats();
  CHECK(s.cache_hits >= reqs.size());  // the whole second round at least
  CHECK(s.full_plans > 0);
  CHECK(s.simple_plans > 0);
}

TEST_CASE("planner: concurrent planning") {
  Planner planner(PaperGraph(2));
  std::vector<std::thread> threads;
  threads.reserve(4);
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const int64_t n = int64_t{1} << (10 + (i + t) % 16);
        Result<Path> p =
            planner.Plan(At(0, PaperMemory::kFbm, Layout::RowMajor(1)),
                         At(1, PaperMemory::kFbm, Layout::Soa(1)), Box::FromExtents({n}), 32);
        ok += p.ok();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(ok == 200);
  const PlannerStats s = planner.stats();
  CHECK(s.cache_hits + s.cache_misses == 200);
  CHECK(s.simple_plans + s.full_plans == s.cache_misses);
}

// The issue #13 case: AOS -> SOA of 4M points x 8 fields x 4 B on one SYS
// memory. The layouts share no prefix, so each run is one field's value:
// the hop is predicted at tp(4 bytes), not tp(1), on a Memcpy function of
// run bytes (how converting channels are calibrated).
TEST_CASE("planner: an AOS<->SOA hop is predicted at the smallest field's run, in bytes") {
  Topology t;
  const MemoryId sys{0, 0};
  t.memories = {{sys, MemoryKind::kSys, "sys0"}};
  auto tp = ThroughputFunction::FromSamples({{1, 1.9e9},
                                             {2, 3.1e9},
                                             {4, 4.6e9},
                                             {8, 5.0e9},
                                             {64, 6.0e9},
                                             {4096, 7.0e9},
                                             {64 * kMiB, 8.0e9}});
  REQUIRE(tp.ok());
  t.edges.push_back({sys, sys, 0, ChannelKind::kMemcpy, "memcpy0", *tp});
  t.edges.back().traits = PaperTraits(ChannelKind::kMemcpy);
  const FieldSpace fields = FieldSpace::Uniform(8, 4);
  REQUIRE(fields.smallest_bytes() == 4);
  for (const int64_t points : {int64_t{1000}, int64_t{4} << 20}) {  // simple, then full
    DYNAMIC_SECTION(points << " points") {
      const Box box = Box::FromExtents({points});
      for (const auto& [from, to] :
           {std::pair{Layout::Aos(1), Layout::Soa(1)}, std::pair{Layout::Soa(1), Layout::Aos(1)}}) {
        Planner planner(t);
        auto p = planner.Plan({sys, from}, {sys, to}, box, fields.total_bytes(),
                              fields.smallest_bytes());
        REQUIRE(p.ok());
        REQUIRE(p->edges.size() == 1);
        CHECK(p->predicted_bps == Approx(tp->At(4)));
        CHECK(p->hop_bps[0] == Approx(tp->At(4)));
        // Without the field sizes the run is counted in points (1 byte).
        auto unknown = Planner(t).Plan({sys, from}, {sys, to}, box, fields.total_bytes());
        REQUIRE(unknown.ok());
        CHECK(unknown->predicted_bps == Approx(tp->At(1)));
      }
      // A copy that keeps the layout moves whole entries: F is in the
      // prefix and the field size plays no part.
      auto same = Planner(t).Plan({sys, Layout::Aos(1)}, {sys, Layout::Aos(1)}, box, 32, 4);
      REQUIRE(same.ok());
      CHECK(same->predicted_bps == Approx(tp->At(static_cast<uint64_t>(points) * 32)));
    }
  }
}

TEST_CASE("plan cache: the smallest field's size is part of the key") {
  const PlanEndpoint a = At(0, PaperMemory::kSys, Layout::Aos(1));
  const PlanEndpoint b = At(0, PaperMemory::kSys, Layout::Soa(1));
  const Box box = Box::FromExtents({1000});
  CHECK(PlanKey::Make(a, b, box, 32) == PlanKey::Make(a, b, box, 32, 1));
  CHECK_FALSE(PlanKey::Make(a, b, box, 32, 4) == PlanKey::Make(a, b, box, 32, 1));
}

}  // namespace ISOMETRY_TEST_FILE
