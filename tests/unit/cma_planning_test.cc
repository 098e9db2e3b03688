// Planning copies with client process memory (issue 14): PROCESS is only
// ever a path's end, and the CMA edge's per-run cost decides between a
// direct converting hop and packing through a staging slot.
#include <catch2/catch.hpp>

#include "planner/planner.h"
#include "planner/testing/synthetic_graphs.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

constexpr MemoryId kSys{0, 0}, kReg{0, 1}, kProc{0, 2};

// sys0 and reg0 joined by memcpy (self-loops too), proc <-> each by cma at
// 0.4 us per iovec and 13 GB/s; memcpy at 9 GB/s.
Topology Graph() {
  Topology t;
  t.memories = {{kSys, MemoryKind::kSys, "sys0"},
                {kReg, MemoryKind::kReg, "reg0"},
                {kProc, MemoryKind::kProcess, "proc"}};
  const ThroughputFunction memcpy = ThroughputFunction::PerRequestOverhead(9e9, 5e-9);
  const ThroughputFunction cma = ThroughputFunction::PerRequestOverhead(13e9, 0.4e-6);
  for (MemoryId a : {kSys, kReg}) {
    for (MemoryId b : {kSys, kReg}) {
      t.edges.push_back({a, b, 0, ChannelKind::kMemcpy, "memcpy0", memcpy});
    }
    t.edges.push_back({kProc, a, 1, ChannelKind::kCma, "cma0", cma});
    t.edges.push_back({a, kProc, 1, ChannelKind::kCma, "cma0", cma});
  }
  for (TopologyEdge& e : t.edges) e.traits = PaperTraits(e.kind);
  return t;
}

bool StagesInProcess(const Path& p) {
  for (size_t i = 1; i + 1 < p.nodes.size(); ++i) {
    if (p.nodes[i].memory == kProc) return true;
  }
  return false;
}

}  // namespace

TEST_CASE(
    "private to private goes through host staging, packing fine layouts and not coarse ones") {
  Planner planner(Graph());
  const Box bounds = Box::FromExtents({8192});
  const PlanEndpoint src{kProc, Layout::Aos(1)}, dst{kProc, Layout::Soa(1)};
  // Two 8-byte fields: AOS -> SOA moves 8-byte runs; packed on memcpy.
  Result<Path> fine = planner.Plan(src, dst, bounds, 16, 8);
  REQUIRE(fine.ok());
  INFO(fine->ToString(planner.topology()));
  CHECK(!StagesInProcess(*fine));
  REQUIRE(fine->edges.size() == 3);
  CHECK(fine->edges[0].kind == ChannelKind::kCma);
  CHECK(fine->edges[1].kind == ChannelKind::kMemcpy);
  CHECK(fine->edges[2].kind == ChannelKind::kCma);
  CHECK(fine->run_bytes[1] == 8);
  // Two 64 KiB fields: runs of 64 KiB cost little per iovec; CMA converts.
  Result<Path> coarse = planner.Plan(src, dst, bounds, 2 << 16, 1 << 16);
  REQUIRE(coarse.ok());
  INFO(coarse->ToString(planner.topology()));
  CHECK(!StagesInProcess(*coarse));
  REQUIRE(coarse->edges.size() == 2);
  CHECK(coarse->edges[0].kind == ChannelKind::kCma);
  CHECK(coarse->edges[1].kind == ChannelKind::kCma);
  CHECK(coarse->run_bytes[1] == (1u << 16));
}

TEST_CASE("host to host copies never stage in PROCESS memory, small or large") {
  Planner planner(Graph());
  for (const int64_t n : {int64_t{1} << 10, int64_t{1} << 22}) {
    Result<Path> p =
        planner.Plan({kSys, Layout::Aos(1)}, {kReg, Layout::Soa(1)}, Box::FromExtents({n}), 16, 8);
    REQUIRE(p.ok());
    INFO(p->ToString(planner.topology()));
    CHECK(!StagesInProcess(*p));
  }
}

}  // namespace ISOMETRY_TEST_FILE
