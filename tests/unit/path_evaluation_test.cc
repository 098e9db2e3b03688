// The cost model's hop and path figures (planner/full_planner.h): which
// curve a hop reads (contiguous, 2-field or 8-field conversion), at which
// size, and the shared-memory bound on a node's Memcpy hops.
#include "planner/path_evaluation.h"

#include <catch2/catch.hpp>

#include "planner/full_planner.h"
#include "planner/testing/synthetic_graphs.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

constexpr double kGB = 1e9;

MemoryId Mem(uint32_t node, uint32_t memory) { return {node, memory}; }

// A graph of one or two nodes: SYS (0) and REG (1) on each, a channel of
// `edge`'s kind (Memcpy unless set) between every pair on a node, `edge` as
// the template of each, with its kind's traits.
Topology Graph(const TopologyEdge& edge, int nodes = 1) {
  Topology t;
  for (uint32_t n = 0; n < static_cast<uint32_t>(nodes); ++n) {
    t.memories.push_back({Mem(n, 0), MemoryKind::kSys, "sys"});
    t.memories.push_back({Mem(n, 1), MemoryKind::kReg, "reg"});
    for (uint32_t a = 0; a < 2; ++a) {
      for (uint32_t b = 0; b < 2; ++b) {
        TopologyEdge e = edge;
        e.src = Mem(n, a);
        e.dst = Mem(n, b);
        e.traits = PaperTraits(e.kind);
        t.edges.push_back(e);
      }
    }
  }
  return t;
}

Path PathOf(const Topology& t, const std::vector<PathNode>& nodes) {
  Path p;
  p.nodes = nodes;
  for (size_t i = 0; i + 1 < nodes.size(); ++i) {
    p.edges.push_back(*t.FindEdge(nodes[i].memory, nodes[i + 1].memory));
  }
  return p;
}

// Runs: 1 GB/s below 1 KiB, 10 GB/s from 1 KiB up (a conversion curve).
ThroughputFunction RunCurve() {
  return *ThroughputFunction::FromSamples({{1, 1 * kGB}, {1024, 10 * kGB}});
}

}  // namespace

TEST_CASE("a contiguous hop reads the contiguous curve, a conversion the run-size curve") {
  TopologyEdge e;
  e.tp = RunCurve();
  e.tp_contiguous = ThroughputFunction::Constant(20 * kGB);
  const Topology t = Graph(e);
  const Box b = Box::FromExtents({1 << 20});
  // Same layout at both ends: one contiguous run, the contiguous curve.
  auto same = EvaluatePath(t, PathOf(t, {{Mem(0, 0), Layout::Aos(1)}, {Mem(0, 0), Layout::Aos(1)}}),
                           b, 32, {}, 4);
  REQUIRE(same.ok());
  CHECK(same->predicted_bps == Approx(20 * kGB));
  // AOS -> SOA of 4-byte fields: runs of 4 bytes, the run-size curve.
  auto conv = EvaluatePath(t, PathOf(t, {{Mem(0, 0), Layout::Aos(1)}, {Mem(0, 0), Layout::Soa(1)}}),
                           b, 32, {}, 4);
  REQUIRE(conv.ok());
  CHECK(conv->run_bytes[0] == 4);
  CHECK(conv->predicted_bps == Approx(RunCurve().At(4)));
  // Without a contiguous curve (an old calibration file), tp serves both.
  TopologyEdge old = e;
  old.tp_contiguous.reset();
  const Topology t_old = Graph(old);
  auto plain =
      EvaluatePath(t_old, PathOf(t_old, {{Mem(0, 0), Layout::Aos(1)}, {Mem(0, 0), Layout::Aos(1)}}),
                   b, 32, {}, 4);
  REQUIRE(plain.ok());
  CHECK(plain->predicted_bps == Approx(10 * kGB));
}

TEST_CASE("a conversion's figure moves from the 2-field to the 8-field curve with its fields") {
  TopologyEdge e;
  e.tp = ThroughputFunction::Constant(12 * kGB);
  e.tp_fields8 = *ThroughputFunction::FromSamples({{1, 6 * kGB}, {64, 6 * kGB}});
  const Box b = Box::FromExtents({1 << 20});
  const Topology t = Graph(e);
  const Path p = PathOf(t, {{Mem(0, 0), Layout::Aos(1)}, {Mem(0, 0), Layout::Soa(1)}});
  auto bps = [&](uint64_t field_bytes, uint64_t element_bytes) {
    auto r = EvaluatePath(t, p, b, field_bytes, {}, element_bytes);
    REQUIRE(r.ok());
    return r->predicted_bps;
  };
  CHECK(bps(8, 4) == Approx(12 * kGB));   // 2 fields of 4 bytes
  CHECK(bps(16, 4) == Approx(9 * kGB));   // 4: halfway in log2
  CHECK(bps(32, 4) == Approx(6 * kGB));   // 8
  CHECK(bps(256, 4) == Approx(6 * kGB));  // 64 fields: no further than the 8-field figure
  // Runs past kFields8MaxRun (here 128 B) read tp.
  CHECK(bps(1024, 128) == Approx(12 * kGB));
}

TEST_CASE("a run-size curve is read at no more than the channel's request size") {
  TopologyEdge e;
  e.tp = *ThroughputFunction::FromSamples({{4 << 20, 3 * kGB}, {64 << 20, 4 * kGB}});
  e.max_request_bytes = 4 << 20;
  const Topology t = Graph(e);
  const Box b = Box::FromExtents({128 << 20});  // 1 GiB of 8-byte entries
  const Path p = PathOf(t, {{Mem(0, 0), Layout::Aos(1)}, {Mem(0, 1), Layout::Aos(1)}});
  auto r = EvaluatePath(t, p, b, 8);
  REQUIRE(r.ok());
  CHECK(r->run_bytes[0] == 1ull << 30);        // the run is the whole copy...
  CHECK(r->predicted_bps == Approx(3 * kGB));  // ...issued as 4 MiB requests
  TopologyEdge unbounded = e;
  unbounded.max_request_bytes = 0;
  const Topology t2 = Graph(unbounded);
  auto r2 = EvaluatePath(t2, PathOf(t2, {{Mem(0, 0), Layout::Aos(1)}, {Mem(0, 1), Layout::Aos(1)}}),
                         b, 8);
  REQUIRE(r2.ok());
  CHECK(r2->predicted_bps == Approx(4 * kGB));
}

TEST_CASE("a node's uncapped Memcpy hops share its memory and their channels' threads") {
  TopologyEdge e;
  e.tp = ThroughputFunction::Constant(10 * kGB);
  const Box b = Box::FromExtents({1 << 20});
  const std::vector<PathNode> two_hops = {
      {Mem(0, 0), Layout::Aos(1)}, {Mem(0, 1), Layout::Aos(1)}, {Mem(0, 0), Layout::Aos(1)}};
  const Topology t = Graph(e);
  auto shared = EvaluatePath(t, PathOf(t, two_hops), b, 8);
  REQUIRE(shared.ok());
  CHECK(shared->hop_bps[0] == Approx(10 * kGB));    // each hop alone
  CHECK(shared->predicted_bps == Approx(5 * kGB));  // both at once
  CHECK(shared->request_bytes[0] <= shared->run_bytes[0]);

  // Capped hops run at their cap: left out of the bound.
  TopologyEdge capped = e;
  capped.rate_limit_bytes_per_s = 1 * kGB;
  capped.tp = ThroughputFunction::Constant(1 * kGB);
  const Topology tc = Graph(capped);
  auto paced = EvaluatePath(tc, PathOf(tc, two_hops), b, 8);
  REQUIRE(paced.ok());
  CHECK(paced->predicted_bps == Approx(1 * kGB));

  // Other channels (a disk, a network) do not share the bound: their
  // traits say so.
  TopologyEdge disk = e;
  disk.kind = ChannelKind::kDiskWrite;
  const Topology td = Graph(disk);
  auto other = EvaluatePath(td, PathOf(td, two_hops), b, 8);
  REQUIRE(other.ok());
  CHECK(other->predicted_bps == Approx(10 * kGB));

  // The bound itself: per node, and only for two hops or more.
  TopologyEdge a{Mem(0, 0), Mem(0, 1)}, c{Mem(1, 0), Mem(1, 1)};
  a.traits = c.traits = PaperTraits(ChannelKind::kMemcpy);
  CHECK(full_planner_internal::SharedMemoryBound({4 * kGB, 4 * kGB}, {&a, &c}) ==
        std::numeric_limits<double>::infinity());
  CHECK(full_planner_internal::SharedMemoryBound({4 * kGB, 12 * kGB}, {&a, &a}) == Approx(3 * kGB));

  // With the node's parallel copy rate measured: hops on separate
  // channels run at once and share it; hops of one channel still add
  // their times.
  TopologyEdge up{Mem(0, 0), Mem(0, 1)}, down{Mem(0, 1), Mem(0, 0)};
  up.traits = down.traits = PaperTraits(ChannelKind::kMemcpy);
  up.channel = 0;
  down.channel = 1;
  up.node_copy_bps = down.node_copy_bps = 25 * kGB;
  CHECK(full_planner_internal::SharedMemoryBound({20 * kGB, 20 * kGB}, {&up, &down}) ==
        Approx(12.5 * kGB));
  CHECK(full_planner_internal::SharedMemoryBound({10 * kGB, 12 * kGB}, {&up, &down}) ==
        Approx(10 * kGB));  // a channel alone is no faster than its hop
  down.channel = 0;         // one channel's threads serve both: 1 / (1/20 + 1/20)
  CHECK(full_planner_internal::SharedMemoryBound({20 * kGB, 20 * kGB}, {&up, &down}) ==
        Approx(10 * kGB));
  // With the pipelined pair measured too: two hops on separate channels
  // move what the pair moved through the ring, not node_copy / 2; a
  // channel alone is still no faster than its hop, and three hops share
  // the node's copy rate as before.
  down.channel = 1;
  up.node_pipe_bps = down.node_pipe_bps = 19 * kGB;
  CHECK(full_planner_internal::SharedMemoryBound({30 * kGB, 30 * kGB}, {&up, &down}) ==
        Approx(19 * kGB));
  CHECK(full_planner_internal::SharedMemoryBound({30 * kGB, 15 * kGB}, {&up, &down}) ==
        Approx(15 * kGB));
  TopologyEdge third = down;
  third.channel = 2;
  CHECK(full_planner_internal::SharedMemoryBound({30 * kGB, 30 * kGB, 30 * kGB},
                                                 {&up, &down, &third}) == Approx(25.0 / 3 * kGB));
  up.node_pipe_bps = down.node_pipe_bps = 0;
  up.node_copy_bps = down.node_copy_bps = 0;  // unmeasured: the old rule
  CHECK(full_planner_internal::SharedMemoryBound({20 * kGB, 20 * kGB}, {&up, &down}) ==
        Approx(10 * kGB));
}

TEST_CASE("a pipelined pair of hops on separate channels moves what the pair moved") {
  // Each hop alone was measured between two memory-sized areas at 8 GB/s;
  // the pair through the runtime's ring at 10 (the ring stays in the
  // cache, so each hop runs above its own curve).
  TopologyEdge e;
  e.tp = ThroughputFunction::Constant(4 * kGB);  // runs of a conversion
  e.tp_contiguous = ThroughputFunction::Constant(8 * kGB);
  e.node_copy_bps = 14 * kGB;
  e.node_pipe_bps = 10 * kGB;
  Topology t = Graph(e);
  const auto channels = [&t](bool separate) {
    for (TopologyEdge& edge : t.edges) edge.channel = separate && edge.src.memory == 1 ? 1 : 0;
  };
  // SYS -> REG -> SYS, REG and the destination in layout `to`.
  const auto two_hops = [&t](Layout to) {
    auto r =
        EvaluatePath(t, PathOf(t, {{Mem(0, 0), Layout::Aos(1)}, {Mem(0, 1), to}, {Mem(0, 0), to}}),
                     Box::FromExtents({1 << 20}), 32, {}, 4);
    REQUIRE(r.ok());
    return *r;
  };
  channels(/*separate=*/true);
  const Path plain = two_hops(Layout::Aos(1));
  CHECK(plain.predicted_bps == Approx(10 * kGB));
  CHECK(plain.hop_bps[0] == Approx(10 * kGB));
  CHECK(plain.hop_bps[1] == Approx(10 * kGB));
  // A hop that changes the layout runs at its run curve's share of a plain
  // copy (4 of 8) in the pipe too.
  CHECK(two_hops(Layout::Soa(1)).predicted_bps == Approx(5 * kGB));
  // One channel's threads serving both hops: their times add up, as before.
  channels(/*separate=*/false);
  CHECK(two_hops(Layout::Aos(1)).predicted_bps == Approx(4 * kGB));
  // Unmeasured, the pair reads the hops' own curves and shares the node's
  // copy rate, as before.
  channels(/*separate=*/true);
  for (TopologyEdge& edge : t.edges) edge.node_pipe_bps = 0;
  CHECK(two_hops(Layout::Aos(1)).predicted_bps == Approx(7 * kGB));
}

}  // namespace ISOMETRY_TEST_FILE
