#include "planner/simple_planner.h"

#include <catch2/catch.hpp>

#include "planner/full_planner.h"
#include "planner/testing/synthetic_graphs.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

// Two-node graph of the paper's fig. 4 without GPUs: SYS, REG and DSK on
// node 0, REG* on node 1; memcpy among host memories, disk channels, network.
Topology PaperGraph() {
  Topology t;
  const MemoryId sys{0, 0}, reg{0, 1}, dsk{0, 2}, rreg{1, 0};
  t.memories = {{sys, MemoryKind::kSys, "sys"},
                {reg, MemoryKind::kReg, "reg"},
                {dsk, MemoryKind::kDsk, "dsk"},
                {rreg, MemoryKind::kReg, "reg*"}};
  auto edge = [&](MemoryId a, MemoryId b, ChannelKind k, const char* n) {
    t.edges.push_back({a, b, static_cast<int>(t.edges.size()), k, n});
    t.edges.back().traits = PaperTraits(k);
  };
  for (MemoryId a : {sys, reg}) {
    for (MemoryId b : {sys, reg}) edge(a, b, ChannelKind::kMemcpy, "memcpy");
  }
  edge(rreg, rreg, ChannelKind::kMemcpy, "memcpy*");
  edge(sys, dsk, ChannelKind::kDiskWrite, "diskwrite");
  edge(dsk, sys, ChannelKind::kDiskRead, "diskread");
  edge(reg, rreg, ChannelKind::kRemoteMemcpy, "net");
  return t;
}

}  // namespace

TEST_CASE("simple planner: a local copy is the direct memcpy hop, converting on it") {
  const Topology t = PaperGraph();
  auto p = PlanSimple(t, {{0, 0}, Layout::Aos(1)}, {{0, 1}, Layout::Soa(1)});
  REQUIRE(p.ok());
  REQUIRE(p->edges.size() == 1);
  CHECK(p->edges[0].kind == ChannelKind::kMemcpy);
  CHECK(p->nodes[1].layout == Layout::Soa(1));
  CHECK(p->algorithm == "simple");
}

TEST_CASE("simple planner: conversion goes on Memcpy, never on DiskWrite (fig. 9b)") {
  const Topology t = PaperGraph();
  auto p = PlanSimple(t, {{0, 0}, Layout::Aos(1)}, {{0, 2}, Layout::Soa(1)});
  REQUIRE(p.ok());
  // The shortest path SYS -> DSK has no Memcpy: a SYS self-loop is added first.
  REQUIRE(p->edges.size() == 2);
  CHECK(p->edges[0].kind == ChannelKind::kMemcpy);
  CHECK(p->edges[1].kind == ChannelKind::kDiskWrite);
  CHECK(p->nodes[1].layout == Layout::Soa(1));  // converted before the disk
  // Without conversion, the direct hop.
  auto q = PlanSimple(t, {{0, 0}, Layout::Aos(1)}, {{0, 2}, Layout::Aos(1)});
  REQUIRE(q.ok());
  CHECK(q->edges.size() == 1);
}

TEST_CASE("simple planner: shortest multi-hop path; intermediates keep src or dst layout") {
  const Topology t = PaperGraph();
  auto p = PlanSimple(t, {{0, 2}, Layout::Aos(1)}, {{1, 0}, Layout::Soa(1)});
  REQUIRE(p.ok());
  // DSK -> SYS -> REG -> REG*: the first Memcpy hop (SYS -> REG) converts.
  REQUIRE(p->edges.size() == 3);
  CHECK(p->nodes[1].layout == Layout::Aos(1));
  CHECK(p->nodes[2].layout == Layout::Soa(1));
  CHECK(p->nodes[3].layout == Layout::Soa(1));
  CHECK(p->ToString(t) ==
        "dsk<F,x> -[diskread]-> sys<F,x> -[memcpy]-> reg<x,F> -[net]-> reg*<x,F>");
}

TEST_CASE("simple planner: unknown memories and unreachable memories are errors") {
  const Topology t = PaperGraph();
  CHECK(
      absl::IsNotFound(PlanSimple(t, {{9, 9}, Layout::Aos(1)}, {{0, 0}, Layout::Aos(1)}).status()));
  auto r = PlanSimple(t, {{1, 0}, Layout::Aos(1)}, {{0, 0}, Layout::Aos(1)});
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("no path"));
}

// Issue #21: errors named memories by id ("memory 1:0") where users wrote
// names.
TEST_CASE("planners name memories in their errors as users wrote them") {
  const Topology t = PaperGraph();
  const PlanEndpoint remote{{1, 0}, Layout::Aos(1)}, sys{{0, 0}, Layout::Aos(1)};
  const std::string simple(PlanSimple(t, remote, sys).status().message());
  CHECK_THAT(simple, Catch::Contains("from memory 'reg*' to 'sys'"));
  CHECK_THAT(simple, !Catch::Contains("1:0"));
  FullPlanner full(t, {});
  CHECK_THAT(std::string(full.Simple(remote, sys).status().message()),
             Catch::Contains("from memory 'reg*' to 'sys'"));
  const std::string planned(full.Plan(remote, sys, Box::FromExtents({1024}), 8).status().message());
  CHECK_THAT(planned, Catch::Contains("'reg*'"));
  CHECK_THAT(planned, Catch::Contains("'sys'"));
  CHECK_THAT(planned, !Catch::Contains("1:0"));
}

}  // namespace ISOMETRY_TEST_FILE
