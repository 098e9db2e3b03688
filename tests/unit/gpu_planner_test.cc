// Planning over GPU edges without a GPU: the real graph builder
// (daemon/runtime/local_topology.h) over a node config the real
// ResolveGpus gave GPU memories from a synthetic inventory, the real
// planner over it, with synthetic calibrated throughput functions. What a
// GPU machine would plan is what these cases assert; the hops' names are
// what `isoctl plan` prints (Path::ToString is its text).
#include <catch2/catch.hpp>

#include "channels/added_channels.h"
#include "config/gpu_config.h"
#include "daemon/runtime/local_topology.h"
#include "planner/planner.h"
#include "planner/topology_join.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

constexpr uint64_t kMiB = 1 << 20;

// The embedded default (sys0, reg0, zcm0; memcpy0, cma0) with dsk0 and
// its channels, and one GPU: gpu0 with gpu_write0, gpu_read0, gpu_copy0.
RuntimeConfig GpuNode(uint32_t node) {
  RuntimeConfig c = DefaultRuntimeConfig();
  c.node = node;
  AddDiskMemory(c, "/nonexistent");  // pure: no directory is opened here
  const GpuInventory one{{80ull << 30}, {{false}}, ""};
  Result<std::string> added = ResolveGpus(c, GpuConfig{}, one);
  REQUIRE(added.ok());
  REQUIRE(*added ==
          "gpu0 (FBM, device 0, staging 256 MiB), gpu_write0 (gpu_write), "
          "gpu_read0 (gpu_read), gpu_copy0 (gpu_copy)");
  return c;
}

// The graph as calibration would leave it on a machine with an NVMe
// disk: memcpy 10 GB/s, disks 7 GB/s with 20 us per request; the GPU
// models as the runtime starts with them.
Topology Calibrated(const RuntimeConfig& c) {
  Topology t = LocalTopology(c);
  for (TopologyEdge& e : t.edges) {
    if (e.kind == ChannelKind::kMemcpy) e.tp = ThroughputFunction::Constant(10e9);
    if (e.kind == ChannelKind::kDiskRead || e.kind == ChannelKind::kDiskWrite) {
      e.tp = ThroughputFunction::PerRequestOverhead(7e9, 20e-6);
    }
  }
  return t;
}

MemoryId Find(const Topology& t, const std::string& name) {
  for (const TopologyMemory& m : t.memories) {
    if (m.name == name) return m.id;
  }
  FAIL("no memory " << name);
  return {};
}

std::vector<std::string> Channels(const Path& p) {
  std::vector<std::string> out;
  for (const TopologyEdge& e : p.edges) out.push_back(e.channel_name);
  return out;
}

std::vector<std::string> Memories(const Topology& t, const Path& p) {
  std::vector<std::string> out;
  for (const PathNode& n : p.nodes) out.push_back(t.NameOf(n.memory));
  return out;
}

using Names = std::vector<std::string>;

}  // namespace

TEST_CASE("a GPU node's graph has the GPU edges of Isometry table 2 and no others to the GPU") {
  const RuntimeConfig c = GpuNode(0);
  const Topology t = LocalTopology(c);
  const MemoryId gpu = Find(t, "gpu0");
  int writes = 0, reads = 0, copies = 0;
  for (const TopologyEdge& e : t.edges) {
    if (e.src != gpu && e.dst != gpu) continue;
    INFO(t.NameOf(e.src) << " -> " << t.NameOf(e.dst) << " on " << e.channel_name);
    const bool from_host = IsHostMemory(t.FindMemory(e.src)->kind);
    const bool to_host = IsHostMemory(t.FindMemory(e.dst)->kind);
    if (e.kind == ChannelKind::kGpuWrite) {
      ++writes;
      CHECK(from_host);
      CHECK(e.dst == gpu);
    } else if (e.kind == ChannelKind::kGpuRead) {
      ++reads;
      CHECK(to_host);
      CHECK(e.src == gpu);
    } else {
      REQUIRE(e.kind == ChannelKind::kGpuCopy);
      ++copies;
      CHECK(e.src == gpu);
      CHECK(e.dst == gpu);
    }
    CHECK(e.max_request_bytes == GpuConfig{}.request_bytes);
  }
  CHECK(writes == 3);  // sys0, reg0, zcm0
  CHECK(reads == 3);
  CHECK(copies == 1);
  // Pinned memory is the fast way in and out (the model before calibration).
  const TopologyEdge* pinned = t.FindEdge(Find(t, "zcm0"), gpu);
  const TopologyEdge* pageable = t.FindEdge(Find(t, "sys0"), gpu);
  REQUIRE(pinned);
  REQUIRE(pageable);
  CHECK(pinned->tp.At(4 * kMiB) > 2 * pageable->tp.At(4 * kMiB));
}

TEST_CASE("the planner stages host <-> GPU copies through pinned ZCM memory") {
  const Topology t = Calibrated(GpuNode(0));
  Planner planner(t);
  const Box box = Box::FromExtents({16 << 20});  // 64 MiB of 4-byte entries
  const MemoryId sys = Find(t, "sys0"), gpu = Find(t, "gpu0");
  for (const bool up : {true, false}) {
    const PlanEndpoint a{up ? sys : gpu, Layout::Aos(1)}, b{up ? gpu : sys, Layout::Aos(1)};
    Result<Path> p = planner.Plan(a, b, box, 4);
    REQUIRE(p.ok());
    INFO(p->ToString(t));
    CHECK(p->algorithm == "full");
    CHECK(Memories(t, *p) == (up ? Names{"sys0", "zcm0", "gpu0"} : Names{"gpu0", "zcm0", "sys0"}));
    CHECK(Channels(*p) == (up ? Names{"memcpy0", "gpu_write0"} : Names{"gpu_read0", "memcpy0"}));
    CHECK_THAT(p->ToString(t), Catch::Contains(up ? "gpu_write0" : "gpu_read0"));
    CHECK(p->predicted_bps > 5e9);  // above the direct, pageable hop's 4 GB/s
  }
}

TEST_CASE("DSK -> FBM and FBM -> DSK are planned as multi-hop paths through host memory") {
  const Topology t = Calibrated(GpuNode(0));
  Planner planner(t);
  const Box box = Box::FromExtents({64 << 20});  // 256 MiB
  const MemoryId dsk = Find(t, "dsk0"), gpu = Find(t, "gpu0");
  Result<Path> in = planner.Plan({dsk, Layout::Aos(1)}, {gpu, Layout::Aos(1)}, box, 4);
  REQUIRE(in.ok());
  INFO(in->ToString(t));
  REQUIRE(in->edges.size() >= 2);
  CHECK(in->edges.front().kind == ChannelKind::kDiskRead);
  CHECK(in->edges.back().kind == ChannelKind::kGpuWrite);
  CHECK(t.NameOf(in->edges.back().src) == "zcm0");  // the GPU reads pinned memory
  for (size_t k = 1; k + 1 < in->nodes.size(); ++k) {
    CHECK(IsHostMemory(t.FindMemory(in->nodes[k].memory)->kind));
  }
  Result<Path> out = planner.Plan({gpu, Layout::Aos(1)}, {dsk, Layout::Aos(1)}, box, 4);
  REQUIRE(out.ok());
  INFO(out->ToString(t));
  REQUIRE(out->edges.size() >= 2);
  CHECK(out->edges.front().kind == ChannelKind::kGpuRead);
  CHECK(t.NameOf(out->edges.front().dst) == "zcm0");
  CHECK(out->edges.back().kind == ChannelKind::kDiskWrite);
  // Every intermediate buffer fits TH.
  for (uint64_t b : out->buffer_bytes) CHECK(b <= (32 * kMiB));
}

TEST_CASE("a layout change between two GPU instances is one GPUCopy hop on the GPU") {
  const Topology t = Calibrated(GpuNode(0));
  Planner planner(t);
  const Box box = Box::FromExtents({4 << 20});
  const MemoryId gpu = Find(t, "gpu0");
  Result<Path> p = planner.Plan({gpu, Layout::Aos(1)}, {gpu, Layout::Soa(1)}, box, 32, 4);
  REQUIRE(p.ok());
  INFO(p->ToString(t));
  CHECK(Channels(*p) == Names{"gpu_copy0"});
  CHECK(p->nodes.back().layout == Layout::Soa(1));
}

TEST_CASE("GPU to remote GPU is host-staged on both nodes around the network hop") {
  std::vector<NodeGraph> nodes{{"a", 0, Calibrated(GpuNode(0))}, {"b", 1, Calibrated(GpuNode(1))}};
  std::vector<NetworkLink> links{{"a", "b", ChannelKind::kRemoteMemcpy, "tcp:b",
                                  ThroughputFunction::PerRequestOverhead(3e9, 10e-6)},
                                 {"b", "a", ChannelKind::kRemoteMemcpy, "tcp:a",
                                  ThroughputFunction::PerRequestOverhead(3e9, 10e-6)}};
  Result<Topology> joined = JoinTopologies(nodes, links);
  REQUIRE(joined.ok());
  const Topology& t = *joined;
  PlannerOptions o;
  o.max_hops = 6;
  Planner planner(t, o);
  Result<MemoryId> src = FindJoinedMemory(t, "a", 0, "gpu0");
  Result<MemoryId> dst = FindJoinedMemory(t, "b", 1, "gpu0");
  REQUIRE(src.ok());
  REQUIRE(dst.ok());
  Result<Path> p =
      planner.Plan({*src, Layout::Aos(1)}, {*dst, Layout::Aos(1)}, Box::FromExtents({16 << 20}), 4);
  REQUIRE(p.ok());
  INFO(p->ToString(t));
  REQUIRE(p->edges.size() >= 3);
  CHECK(p->edges.front().kind == ChannelKind::kGpuRead);
  CHECK(p->edges.back().kind == ChannelKind::kGpuWrite);
  int net = 0;
  for (const TopologyEdge& e : p->edges) net += e.kind == ChannelKind::kRemoteMemcpy;
  CHECK(net == 1);
  CHECK(p->predicted_bps > 2e9);  // the network hop bounds it, not a pageable GPU hop
}

}  // namespace ISOMETRY_TEST_FILE
