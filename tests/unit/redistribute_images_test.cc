// PlanImages (daemon/node/redistribute_images.cc): which consumer ranks'
// pieces go through an image of their storage in memory, and the pieces
// reordered rank by rank. No daemon: a topology and a setup built here.
#include <array>
#include <catch2/catch.hpp>
#include <utility>
#include <vector>

#include "daemon/node/redistribute_op.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using redistribution::Run;

const MemoryId kSys{0, 0}, kDsk{0, 1}, kGpu{0, 2};

// sys0 <-> dsk0 and sys0 -> sys0; fbm0 reaches nothing.
Topology MakeTopology() {
  Topology t;
  t.memories = {{kSys, MemoryKind::kSys, "sys0"},
                {kDsk, MemoryKind::kDsk, "dsk0"},
                {kGpu, MemoryKind::kFbm, "fbm0"}};
  const std::pair<MemoryId, MemoryId> edges[] = {{kSys, kSys}, {kSys, kDsk}, {kDsk, kSys}};
  for (const auto& [src, dst] : edges) {
    TopologyEdge e;
    e.src = src;
    e.dst = dst;
    t.edges.push_back(e);
  }
  return t;
}

InstanceShape Shape(int64_t rows, int64_t cols, bool column_major) {
  return {Box::FromExtents({rows, cols}), FieldSpace::Uniform(1, 8),
          column_major ? Layout::ColumnMajor(2) : Layout::RowMajor(2)};
}

RankEnd End(MemoryId memory, const InstanceShape& shape, bool file) {
  RankEnd e;
  e.ref.memory = memory;
  e.ref.shape = shape;
  if (file) {
    e.ref.file = "c.bin";
    e.ref.file_in_place = true;
  }
  e.storage = *StridedStorageOf(shape, "rank");
  return e;
}

// The runs every task below points into: dimension 1 whole (`cols`),
// dimension 0 every 4th row (cyclic over 4 producers) or all rows at once.
struct Runs {
  std::vector<Run> cols, whole_rows;
  std::vector<Run> cyclic_rows;
  Runs(uint64_t rows, uint64_t n_cols) {
    cols = {{0, n_cols, 0, 0}};
    whole_rows = {{0, rows, 0, 0}};
    for (uint64_t i = 0; i < rows; i += 4) {
      cyclic_rows.push_back({i, 1, i / 4, i});
    }
  }
};

// A piece for consumer `q` from producer `p`: with `cyclic`, every 4th
// row, enumerated column-major (dimension 0 innermost); else whole rows,
// row-major.
PieceTask Task(uint64_t p, uint64_t q, const Runs& r, bool cyclic) {
  PieceTask t;
  t.producer = p;
  t.consumer = q;
  t.runs[1] = r.cols;
  t.dim0 = cyclic ? r.cyclic_rows : r.whole_rows;
  t.order = cyclic ? std::array<int, 4>{1, 0, 2, 3} : std::array<int, 4>{0, 1, 2, 3};
  t.bytes = t.dim0.size() * (cyclic ? 1 : t.dim0[0].length) * r.cols[0].length * 8;
  return t;
}

TEST_CASE("PlanImages images file ranks written in small runs, rank by rank") {
  const Topology topo = MakeTopology();
  const Runs small(64, 32);
  RedistributionOp::Setup setup;
  setup.dims = 2;
  setup.producers = {End(kSys, Shape(16, 32, false), false),
                     End(kSys, Shape(16, 32, false), false)};
  // 0: a column-major file (1-element runs); 1: memory; 2: a file on
  // another node; 3: a column-major file again.
  setup.consumers = {End(kDsk, Shape(64, 32, true), true), End(kSys, Shape(64, 32, true), false),
                     End(kDsk, Shape(64, 32, true), true), End(kDsk, Shape(64, 32, true), true)};
  setup.consumers[2].node = "b";
  for (uint64_t p = 0; p < 2; ++p) {
    for (uint64_t q : {3, 1, 0, 2}) {
      setup.tasks.push_back(Task(p, q, small, true));
    }
  }
  const auto plans = PlanImages(topo, setup);
  // 1: memory, its runs one call each already; 2: another node writes it.
  REQUIRE(plans.size() == 2);
  CHECK(plans[0].consumer == 0);
  CHECK(plans[0].memory == kSys);
  CHECK(plans[0].offset == 0);
  CHECK(plans[0].bytes == uint64_t{64} * 32 * 8);
  CHECK(plans[0].pieces == 2);
  CHECK(plans[1].consumer == 3);
  // Imaged ranks' pieces first, rank by rank, in their dealt order; the
  // rest after, as dealt.
  std::vector<std::array<int64_t, 3>> order;
  for (const PieceTask& t : setup.tasks) {
    order.push_back({static_cast<int64_t>(t.consumer), static_cast<int64_t>(t.producer), t.image});
  }
  CHECK(order == std::vector<std::array<int64_t, 3>>{{0, 0, 0},
                                                     {0, 1, 0},
                                                     {3, 0, 1},
                                                     {3, 1, 1},
                                                     {1, 0, -1},
                                                     {2, 0, -1},
                                                     {1, 1, -1},
                                                     {2, 1, -1}});
}

TEST_CASE("PlanImages cuts a large rank into windows along its outermost dimension") {
  // 8192 x 8192 doubles, column-major: 512 MiB, 64 KiB a column, so 32
  // windows of 256 columns; the piece (every 4th row, every column) is
  // cut into one per window, columns counted from the window's first.
  const Topology topo = MakeTopology();
  const Runs big(8192, 8192);
  RedistributionOp::Setup setup;
  setup.dims = 2;
  setup.producers = {End(kSys, Shape(2048, 8192, false), false)};
  setup.consumers = {End(kDsk, Shape(8192, 8192, true), true)};
  setup.tasks = {Task(0, 0, big, true)};
  const uint64_t whole = setup.tasks[0].bytes;
  const auto plans = PlanImages(topo, setup);
  REQUIRE(plans.size() == 32);
  REQUIRE(setup.tasks.size() == 32);
  uint64_t bytes = 0;
  for (size_t k = 0; k < 32; ++k) {
    CHECK(plans[k].offset == k * (uint64_t{16} << 20));
    CHECK(plans[k].bytes == uint64_t{16} << 20);
    CHECK(plans[k].pieces == 1);
    const PieceTask& t = setup.tasks[k];
    CHECK(t.image == static_cast<int64_t>(k));
    CHECK(t.cut_dim == 1);
    CHECK(t.cut == std::vector<Run>{{k * 256, 256, k * 256, 0}});
    // Every part enumerates the same rows, held once for all of them.
    CHECK(t.dim0.empty());
    CHECK(t.RunsOf(0).size() == 2048);
    CHECK(t.shared_dim0 == setup.tasks[0].shared_dim0);
    bytes += t.bytes;
  }
  CHECK(bytes == whole);
}

TEST_CASE("PlanImages cuts a large row-major rank in dimension 0") {
  // 8192 x 8192 doubles, row-major, from a producer holding every 4th
  // column: 1-element runs in each row; windows of 256 whole rows, the
  // piece's dimension-0 runs cut per window.
  const Topology topo = MakeTopology();
  const Runs big(8192, 8192);
  RedistributionOp::Setup setup;
  setup.dims = 2;
  setup.producers = {End(kSys, Shape(8192, 2048, false), false)};
  setup.consumers = {End(kDsk, Shape(8192, 8192, false), true)};
  PieceTask t;
  t.runs[1] = big.cyclic_rows;  // every 4th index, here of the columns
  t.dim0 = big.whole_rows;
  t.bytes = uint64_t{8192} * 2048 * 8;
  setup.tasks = {t};
  const auto plans = PlanImages(topo, setup);
  REQUIRE(plans.size() == 32);
  REQUIRE(setup.tasks.size() == 32);
  for (size_t k = 0; k < 32; ++k) {
    const PieceTask& part = setup.tasks[k];
    CHECK(plans[k].offset == k * (uint64_t{16} << 20));
    CHECK(part.cut_dim == 0);
    CHECK(part.cut == std::vector<Run>{{k * 256, 256, k * 256, 0}});
    CHECK(part.RunsOf(0).size() == 1);
    CHECK(part.RunsOf(1).size() == 2048);
    CHECK(part.bytes == uint64_t{256} * 2048 * 8);
  }
}

TEST_CASE("PlanImages leaves long runs, scattered elements and unreachable producers alone") {
  const Topology topo = MakeTopology();
  SECTION("long runs: whole rows of 4096 elements into row-major files") {
    const Runs rows(8, 4096);
    RedistributionOp::Setup setup;
    setup.dims = 2;
    setup.producers = {End(kSys, Shape(8, 4096, false), false)};
    setup.consumers = {End(kDsk, Shape(8, 4096, false), true)};
    setup.tasks = {Task(0, 0, rows, false)};
    CHECK(PlanImages(topo, setup).empty());
  }
  SECTION("a large SOA of two fields: no window is one range") {
    const Runs big(8192, 4096);
    RedistributionOp::Setup setup;
    setup.dims = 2;
    const InstanceShape soa{Box::FromExtents({8192, 4096}), FieldSpace::Uniform(2, 8),
                            Layout::Soa(2)};
    setup.producers = {End(kSys, Shape(2048, 4096, false), false)};
    setup.consumers = {End(kDsk, soa, true)};
    setup.tasks = {Task(0, 0, big, true)};
    CHECK(PlanImages(topo, setup).empty());
  }
  SECTION("a producer whose memory reaches no host memory") {
    const Runs small(64, 32);
    RedistributionOp::Setup setup;
    setup.dims = 2;
    setup.producers = {End(kGpu, Shape(16, 32, false), false)};
    setup.consumers = {End(kDsk, Shape(64, 32, true), true)};
    setup.tasks = {Task(0, 0, small, true)};
    CHECK(PlanImages(topo, setup).empty());
  }
  SECTION("a producer on another node turns images off") {
    // Node b runs its producer's pieces and writes them into this node's
    // file itself: an image of this node's pieces written over the range
    // would replace them (an ASan run read 0xBE bytes there, "done").
    const Runs small(64, 32);
    RedistributionOp::Setup setup;
    setup.dims = 2;
    setup.producers = {End(kSys, Shape(16, 32, false), false),
                       End(kSys, Shape(16, 32, false), false)};
    setup.producers[1].node = "b";
    setup.consumers = {End(kDsk, Shape(64, 32, true), true)};
    setup.tasks = {Task(0, 0, small, true)};
    CHECK(PlanImages(topo, setup).empty());
    setup.producers[1].node.clear();  // the same job with both producers here is imaged
    CHECK(PlanImages(topo, setup).size() == 1);
  }
}

}  // namespace ISOMETRY_TEST_FILE
