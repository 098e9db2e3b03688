#include "planner/topology_join.h"

#include <catch2/catch.hpp>

#include "planner/planner.h"
#include "planner/testing/synthetic_graphs.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

// A node with SYS memory 0, REG memory 1 and a memcpy channel each way.
NodeGraph HostNode(const std::string& name, uint32_t id) {
  NodeGraph n{name, id, {}};
  const MemoryId sys{id, 0}, reg{id, 1};
  n.topology.memories = {{sys, MemoryKind::kSys, "sys0"}, {reg, MemoryKind::kReg, "reg0"}};
  n.topology.edges = {{sys, reg, 0, ChannelKind::kMemcpy, "memcpy"},
                      {reg, sys, 0, ChannelKind::kMemcpy, "memcpy"}};
  for (TopologyEdge& e : n.topology.edges) e.traits = PaperTraits(e.kind);
  return n;
}

NetworkLink Tcp(const std::string& from, const std::string& to) {
  return {from,
          to,
          ChannelKind::kRemoteMemcpy,
          "tcp",
          ThroughputFunction::PerRequestOverhead(1e9, 50e-6),
          PaperTraits(ChannelKind::kRemoteMemcpy)};
}

std::vector<const TopologyEdge*> NetEdges(const Topology& t) {
  std::vector<const TopologyEdge*> out;
  for (const TopologyEdge& e : t.edges) {
    if (e.kind == ChannelKind::kRemoteMemcpy) out.push_back(&e);
  }
  return out;
}

}  // namespace

TEST_CASE("two nodes: memories renamed, own edges kept, one network edge SYS to SYS") {
  auto joined = JoinTopologies({HostNode("a", 1), HostNode("b", 2)}, {Tcp("a", "b")});
  REQUIRE(joined.ok());
  const Topology& t = *joined;
  REQUIRE(t.memories.size() == 4);
  CHECK(t.memories[0].name == "a:sys0");
  CHECK(t.memories[1].name == "a:reg0");
  CHECK(t.memories[2].name == "b:sys0");
  CHECK(t.memories[3].name == "b:reg0");
  CHECK(t.memories[0].id == MemoryId{1, 0});
  CHECK(t.memories[2].id == MemoryId{2, 0});
  REQUIRE(t.edges.size() == 5);
  auto net = NetEdges(t);
  REQUIRE(net.size() == 1);
  CHECK(net[0]->src == MemoryId{1, 0});
  CHECK(net[0]->dst == MemoryId{2, 0});
  CHECK(net[0]->channel_name == "tcp");
  CHECK(net[0]->channel == -1);
  // One direction only: nothing carries b's data to a.
  CHECK(t.FindEdge(MemoryId{2, 0}, MemoryId{1, 0}) == nullptr);
  CHECK(t.NameOf(MemoryId{2, 1}) == "b:reg0");
}

TEST_CASE("the joined graph plans a path over the network edge") {
  auto joined = JoinTopologies({HostNode("a", 1), HostNode("b", 2)}, {Tcp("a", "b")});
  REQUIRE(joined.ok());
  const Box box = Box::FromExtents({1024});
  const Layout l = Layout::Parse("F,x", 1).value();
  PlannerOptions po;
  po.cache_capacity = 0;
  Planner planner(*joined, po);
  auto path = planner.Plan({MemoryId{1, 1}, l}, {MemoryId{2, 1}, l}, box, 4);
  REQUIRE(path.ok());
  REQUIRE(path->edges.size() == 3);
  CHECK(path->edges[1].kind == ChannelKind::kRemoteMemcpy);
}

TEST_CASE("three nodes: edges between nodes only where a link exists") {
  auto joined = JoinTopologies({HostNode("a", 1), HostNode("b", 2), HostNode("c", 3)},
                               {Tcp("a", "b"), Tcp("b", "c")});
  REQUIRE(joined.ok());
  const Topology& t = *joined;
  CHECK(t.memories.size() == 6);
  auto net = NetEdges(t);
  REQUIRE(net.size() == 2);
  CHECK(t.FindEdge(MemoryId{1, 0}, MemoryId{2, 0}) != nullptr);
  CHECK(t.FindEdge(MemoryId{2, 0}, MemoryId{3, 0}) != nullptr);
  CHECK(t.FindEdge(MemoryId{1, 0}, MemoryId{3, 0}) == nullptr);
  for (const TopologyEdge& e : t.edges) {
    if (e.kind != ChannelKind::kRemoteMemcpy) CHECK(e.src.node == e.dst.node);
  }
  // Every memory keeps its own id and its node's name.
  for (const TopologyMemory& m : t.memories) {
    const std::string prefix = std::string(1, static_cast<char>('a' + m.id.node - 1)) + ":";
    CHECK(m.name.rfind(prefix, 0) == 0);
  }
}

TEST_CASE("a peer with an empty topology joins with no memories and no network edges") {
  auto joined = JoinTopologies({HostNode("a", 1), NodeGraph{"b", 2, {}}}, {Tcp("a", "b")});
  REQUIRE(joined.ok());
  CHECK(joined->memories.size() == 2);
  CHECK(joined->edges.size() == 2);
  CHECK(NetEdges(*joined).empty());
  CHECK_FALSE(FindJoinedMemory(*joined, "b", 2, "").ok());
}

TEST_CASE("several SYS memories: one network edge per pair") {
  NodeGraph b = HostNode("b", 2);
  b.topology.memories.push_back({MemoryId{2, 2}, MemoryKind::kSys, "sys1"});
  auto joined = JoinTopologies({HostNode("a", 1), b}, {Tcp("a", "b")});
  REQUIRE(joined.ok());
  CHECK(NetEdges(*joined).size() == 2);
}

TEST_CASE("a node named twice, or a link to a node not joined, is refused") {
  auto twice = JoinTopologies({HostNode("a", 1), HostNode("a", 2)}, {});
  REQUIRE_FALSE(twice.ok());
  CHECK(absl::IsInvalidArgument(twice.status()));
  CHECK(twice.status().message().find("'a' appears twice") != std::string::npos);
  auto stray = JoinTopologies({HostNode("a", 1)}, {Tcp("a", "z")});
  REQUIRE_FALSE(stray.ok());
  CHECK(stray.status().message().find("'z'") != std::string::npos);
}

// Today's behaviour, documented (topology_join.h): two nodes that share an
// id are not refused. Their memories keep colliding ids, and the link
// connects every SYS memory of both to every SYS memory of both.
TEST_CASE("two nodes with the same id are joined as they are") {
  auto joined = JoinTopologies({HostNode("b", 2), HostNode("c", 2)}, {Tcp("b", "c")});
  REQUIRE(joined.ok());
  CHECK(joined->memories[0].id == joined->memories[2].id);
  CHECK(joined->memories[0].name == "b:sys0");
  CHECK(joined->memories[2].name == "c:sys0");
  CHECK(NetEdges(*joined).size() == 4);
  // Looked up by name, each node still finds its own memory.
  auto c_sys = FindJoinedMemory(*joined, "c", 2, "sys0");
  REQUIRE(c_sys.ok());
  CHECK(*c_sys == MemoryId{2, 0});
}

TEST_CASE("FindJoinedMemory: by short name, or the first SYS memory for none") {
  auto joined = JoinTopologies({HostNode("a", 1), HostNode("bee", 2)}, {Tcp("a", "bee")});
  REQUIRE(joined.ok());
  CHECK(FindJoinedMemory(*joined, "bee", 2, "reg0").value() == MemoryId{2, 1});
  CHECK(FindJoinedMemory(*joined, "bee", 2, "").value() == MemoryId{2, 0});
  CHECK(FindJoinedMemory(*joined, "a", 1, "").value() == MemoryId{1, 0});
  auto missing = FindJoinedMemory(*joined, "a", 1, "gpu0");
  REQUIRE_FALSE(missing.ok());
  CHECK(absl::IsNotFound(missing.status()));
  CHECK(missing.status().message() == "node 'a' has no memory 'gpu0'");
}

}  // namespace ISOMETRY_TEST_FILE
