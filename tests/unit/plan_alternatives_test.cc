// The alternatives an explained plan lists: the chosen path first, the
// others weighed under the model with the rule that ruled each out, on the
// paper's fig. 4 graph with table 5 bandwidths.
#include <catch2/catch.hpp>

#include "planner/alternatives.h"
#include "planner/testing/synthetic_graphs.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

Alternatives Weigh(const Planner& planner, const Path& chosen, const Box& bounds, uint64_t fb) {
  AlternativesRequest req;
  req.chosen = &chosen;
  req.bounds = bounds;
  req.field_bytes = fb;
  return WeighAlternatives(planner, req);
}

}  // namespace

TEST_CASE(
    "alternatives: a large SYS -> FBM copy lists the slower direct hop beside the chosen path") {
  Planner planner(PaperGraph(1));
  const Box bounds = Box::FromExtents({int64_t{4} << 20});  // 128 MiB of 32-byte entries
  const PlanEndpoint src{PaperMemoryId(0, PaperMemory::kSys), Layout::Aos(1)};
  const PlanEndpoint dst{PaperMemoryId(0, PaperMemory::kFbm), Layout::Aos(1)};
  Result<Path> chosen = planner.Plan(src, dst, bounds, 32);
  REQUIRE(chosen.ok());
  INFO(chosen->ToString(planner.topology()));
  REQUIRE(chosen->algorithm == "full");
  // Through ZCM, whose GPU write is faster than SYS's (table 5).
  REQUIRE(chosen->nodes.size() == 3);
  CHECK(chosen->nodes[1].memory == PaperMemoryId(0, PaperMemory::kZcm));

  const Alternatives alts = Weigh(planner, *chosen, bounds, 32);
  REQUIRE(alts.paths.size() >= 3);
  CHECK(alts.paths[0].chosen);
  CHECK(alts.paths[0].path == *chosen);
  CHECK(StartsWith(alts.paths[0].verdict, "limited by hop 1 (zcm0 -["));
  CHECK(alts.weighed >= alts.paths.size() - 1);
  bool direct = false;
  for (size_t i = 1; i < alts.paths.size(); ++i) {
    const PlanAlternative& a = alts.paths[i];
    INFO(a.path.ToString(planner.topology()) << ": " << a.verdict);
    CHECK_FALSE(a.chosen);
    CHECK(a.path.nodes != chosen->nodes);
    REQUIRE(a.path.predicted_bps > 0);
    CHECK(a.path.predicted_bps <= chosen->predicted_bps);
    CHECK(StartsWith(a.verdict, "slower: predicted "));
    if (i > 1) CHECK(a.path.predicted_bps <= alts.paths[i - 1].path.predicted_bps);
    if (a.path.edges.size() == 1) {
      direct = true;
      CHECK(a.path.predicted_bps == Approx(kTable5GpuWriteHost).epsilon(0.01));
      CHECK(a.verdict.find("limited by hop 0 (sys0 -[") != std::string::npos);
    }
  }
  CHECK(direct);
}

TEST_CASE("alternatives: a small copy's simple path says the others were not weighed") {
  Planner planner(PaperGraph(1));
  const Box bounds = Box::FromExtents({1024});
  const PlanEndpoint src{PaperMemoryId(0, PaperMemory::kSys), Layout::Aos(1)};
  const PlanEndpoint dst{PaperMemoryId(0, PaperMemory::kFbm), Layout::Aos(1)};
  Result<Path> planned = planner.Plan(src, dst, bounds, 32);
  REQUIRE(planned.ok());
  REQUIRE(planned->algorithm == "simple");
  REQUIRE(planned->edges.size() == 1);
  const Alternatives alts = Weigh(planner, *planned, bounds, 32);
  REQUIRE(alts.paths.size() >= 2);
  bool faster_unweighed = false;
  for (size_t i = 1; i < alts.paths.size(); ++i) {
    const PlanAlternative& a = alts.paths[i];
    INFO(a.path.ToString(planner.topology()) << ": " << a.verdict);
    CHECK(StartsWith(a.verdict, "not weighed: "));
    if (a.path.predicted_bps > planned->predicted_bps) faster_unweighed = true;
  }
  // Through ZCM is faster under the model, but a small copy takes the fewest hops.
  CHECK(faster_unweighed);
}

TEST_CASE(
    "alternatives: a shuffle between two staging buffers is ruled out by the space constraint") {
  Planner planner(PaperGraph(1));
  const Box bounds = Box::FromExtents({4096, 4096});  // 512 MiB of 32-byte entries
  const PlanEndpoint src{PaperMemoryId(0, PaperMemory::kDsk), Layout::RowMajor(2)};
  const PlanEndpoint dst{PaperMemoryId(0, PaperMemory::kDsk), Layout::ColumnMajor(2)};
  Result<Path> planned = planner.Plan(src, dst, bounds, 32);
  REQUIRE(planned.ok());
  const Alternatives alts = Weigh(planner, *planned, bounds, 32);
  bool space = false;
  for (const PlanAlternative& a : alts.paths) {
    INFO(a.path.ToString(planner.topology()) << ": " << a.verdict);
    if (!a.chosen && StartsWith(a.verdict, "ruled out by the model: space: ")) {
      space = true;
      CHECK(a.path.predicted_bps == 0);
      // Staged only in host memories: never DSK or FBM-free shortcuts.
      for (size_t i = 1; i + 1 < a.path.nodes.size(); ++i) {
        CHECK(a.path.nodes[i].memory != PaperMemoryId(0, PaperMemory::kDsk));
      }
    }
  }
  CHECK(space);
  // Rejected candidates come after every evaluated one.
  bool seen_rejected = false;
  for (size_t i = 1; i < alts.paths.size(); ++i) {
    if (alts.paths[i].path.predicted_bps == 0) seen_rejected = true;
    if (seen_rejected) CHECK(alts.paths[i].path.predicted_bps == 0);
  }
}

TEST_CASE("alternatives: the limit bounds the list") {
  Planner planner(PaperGraph(1));
  const Box bounds = Box::FromExtents({int64_t{4} << 20});
  const PlanEndpoint src{PaperMemoryId(0, PaperMemory::kSys), Layout::Aos(1)};
  const PlanEndpoint dst{PaperMemoryId(0, PaperMemory::kSys), Layout::Soa(1)};
  Result<Path> planned = planner.Plan(src, dst, bounds, 32);
  REQUIRE(planned.ok());
  AlternativesRequest req;
  req.chosen = &*planned;
  req.bounds = bounds;
  req.field_bytes = 32;
  req.limit = 2;
  const Alternatives alts = WeighAlternatives(planner, req);
  CHECK(alts.paths.size() == 3);
  CHECK(alts.weighed > 2);
}

TEST_CASE("alternatives: a pipelined pair of Memcpy hops is named as the pair") {
  // SYS -> REG -> SYS on two one-thread channels, evaluated at what the
  // pair moved through the ring (path_evaluation.h, PipedHopRates).
  Topology topo;
  topo.memories = {{{0, 0}, MemoryKind::kSys, "sys0"}, {{0, 1}, MemoryKind::kReg, "reg0"}};
  Path path;
  path.nodes = {{{0, 0}, Layout::Aos(1)}, {{0, 1}, Layout::Aos(1)}, {{0, 0}, Layout::Aos(1)}};
  for (int h = 0; h < 2; ++h) {
    TopologyEdge e;
    e.src = path.nodes[h].memory;
    e.dst = path.nodes[h + 1].memory;
    e.channel = h;
    e.channel_name = h == 0 ? "hop_up" : "hop_down";
    e.traits = PaperTraits(ChannelKind::kMemcpy);
    e.node_pipe_bps = 10e9;
    path.edges.push_back(e);
  }
  path.hop_bps = {10e9, 10e9};
  path.predicted_bps = 10e9;
  CHECK(PathLimit(path, topo) ==
        "limited by what two pipelined Memcpy hops move through their ring: hop 0 (sys0 "
        "-[hop_up]-> reg0) and hop 1 (reg0 -[hop_down]-> sys0) at 10.00 GB/s");
  // The same hops on one channel are no pipelined pair: the slower one
  // limits them, with what they share.
  path.edges[1].channel = 0;
  path.hop_bps = {8e9, 9e9};
  path.predicted_bps = 4.2e9;
  CHECK(StartsWith(PathLimit(path, topo), "limited by what its Memcpy hops share"));
}

}  // namespace ISOMETRY_TEST_FILE
