#include "daemon/runtime/chunker.h"

#include <catch2/catch.hpp>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

TEST_CASE("chunks tile the box exactly once, cut along the source's outer dimension") {
  const Box box = Box::FromExtents({100, 50, 7});
  const FieldSpace fs = FieldSpace::Uniform(2, 4);
  const std::vector<Layout> layouts{Layout::RowMajor(3), Layout::Soa(3), Layout::ColumnMajor(3)};
  auto g =
      ChunkGrid::Make(box, fs, layouts, {false, true, false}, uint64_t{8} * 50 * 7 * 3, 1 << 20);
  REQUIRE(g.ok());
  // Row-major: x (dimension 0) is outermost, so chunks are slabs of x.
  CHECK(g->full_chunk().extent(0) == 3);
  CHECK(g->full_chunk().extent(1) == 50);
  std::vector<int> covered(size_t{100} * 50 * 7, 0);
  for (uint64_t k = 0; k < g->count(); ++k) {
    const Box c = g->chunk(k);
    REQUIRE(box.contains(c));
    for (int64_t x = c.lo[0]; x < c.hi[0]; ++x) {
      for (int64_t y = c.lo[1]; y < c.hi[1]; ++y) {
        for (int64_t z = c.lo[2]; z < c.hi[2]; ++z) ++covered[(x * 50 + y) * 7 + z];
      }
    }
  }
  for (int v : covered) REQUIRE(v == 1);
}

TEST_CASE("slots respect the limit even with padded blocked layouts") {
  const Box box = Box::FromExtents({1000});
  const FieldSpace fs = FieldSpace::Uniform(1, 8);
  const std::vector<Layout> layouts{Layout::Aos(1), *Layout::Hybrid(1, 7), Layout::Aos(1)};
  auto g = ChunkGrid::Make(box, fs, layouts, {false, true, false}, 4096, 400);
  REQUIRE(g.ok());
  CHECK(g->SlotBytes(layouts[1], 8) <= 400);
  CHECK(g->full_chunk().extent(0) % 7 == 0);
}

TEST_CASE("an entry larger than a slot is an error that says what to raise") {
  const Box box = Box::FromExtents({10});
  const FieldSpace fs = FieldSpace::Uniform(1, 4096);
  auto g = ChunkGrid::Make(box, fs, {Layout::Aos(1), Layout::Aos(1), Layout::Aos(1)},
                           {false, true, false}, 1024, 1024);
  REQUIRE(!g.ok());
  CHECK_THAT(std::string(g.status().message()), Catch::Contains("space_threshold"));
}

// Issue #11: blocking factors come from client layouts (up to 2^62); the
// lcm of two coprime ones overflowed int64 inside std::lcm (undefined; the
// UBSan build reports it). Now an alignment that does not fit means "no
// alignment", and the chunks still tile the box.
TEST_CASE("coprime huge blocking factors along a path do not overflow the alignment") {
  const Box box = Box::FromExtents({1000});
  const FieldSpace fs = FieldSpace::Uniform(1, 8);
  const int64_t b = int64_t{1} << 40;
  const std::vector<Layout> layouts{*Layout::Hybrid(1, b), Layout::Aos(1),
                                    *Layout::Hybrid(1, b + 1)};
  auto g = ChunkGrid::Make(box, fs, layouts, {false, true, false}, 800, 1 << 20);
  REQUIRE(g.ok());
  int64_t covered = 0;
  for (uint64_t k = 0; k < g->count(); ++k) {
    const Box c = g->chunk(k);
    REQUIRE(box.contains(c));
    covered += c.extent(0);
  }
  CHECK(covered == 1000);
}

TEST_CASE("a forced intermediate layout whose padded slot does not fit 64 bits is an error") {
  // x_in=2^62 with 16-byte entries: 2^66 bytes per slot. Before saturation
  // the size wrapped to 0 and passed as a tiny buffer.
  const Box box = Box::FromExtents({10});
  const FieldSpace fs = FieldSpace::Uniform(1, 16);
  const std::vector<Layout> layouts{Layout::Aos(1), *Layout::Hybrid(1, int64_t{1} << 62),
                                    Layout::Aos(1)};
  auto g = ChunkGrid::Make(box, fs, layouts, {false, true, false}, 1024, 1 << 20);
  REQUIRE(!g.ok());
  CHECK_THAT(std::string(g.status().message()), Catch::Contains("does not fit a buffer slot"));
}

}  // namespace ISOMETRY_TEST_FILE
