// Distributions of a global index space over a process grid (issue #18):
// validation, owners, local indices and local extents.
#include <catch2/catch.hpp>
#include <limits>
#include <set>

#include "redistribution/distribution.h"
#include "unit/redistribution_reference.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::redistribution;
// Not core/datatype.h's enum of the same name (a header of another file of
// this unity batch may bring it in).
using isometry::redistribution::Distribution;
using isometry::redistribution::testing::ForEachIndex;

namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

Distribution Make(const DistributionSpec& spec) {
  auto d = Distribution::Make(spec);
  REQUIRE(d.ok());
  return *d;
}

std::string Error(const DistributionSpec& spec) {
  auto d = Distribution::Make(spec);
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(d.status().message());
}

}  // namespace

TEST_CASE("bad distributions are refused with a message naming the problem") {
  const auto bc = DimDistribution::BlockCyclic;
  CHECK_THAT(Error({}), Catch::Contains("no dimensions"));
  CHECK_THAT(Error({.extents = {2, 2, 2, 2, 2},
                    .dists = std::vector<DimDistribution>(5),
                    .grid = {1, 1, 1, 1, 1}}),
             Catch::Contains("5 dimensions; at most 4"));
  CHECK_THAT(Error({.extents = {4, 4}, .dists = {bc(2)}, .grid = {1, 1}}),
             Catch::Contains("2 extents but 1 per-dimension distributions"));
  CHECK_THAT(Error({.extents = {4, 0}, .dists = {bc(2), bc(2)}, .grid = {1, 1}}),
             Catch::Contains("dimension 1: global extent is 0"));
  CHECK_THAT(Error({.extents = {4, 4}, .dists = {bc(2), bc(2)}, .grid = {0, 1}}),
             Catch::Contains("dimension 0: process grid size is 0"));
  CHECK_THAT(Error({.extents = {4, 4}, .dists = {bc(2), bc(0)}, .grid = {1, 1}}),
             Catch::Contains("dimension 1: BLOCK_CYCLIC block size is 0"));
  CHECK_THAT(Error({.extents = {kMax, 2}, .dists = {bc(1), bc(1)}, .grid = {1, 1}}),
             Catch::Contains("global extents 18446744073709551615x2 overflow 64 bits"));
  CHECK_THAT(Error({.extents = {4, 4}, .dists = {bc(1), bc(1)}, .grid = {kMax / 2, 3}}),
             Catch::Contains("overflows 64 bits"));
  CHECK_THAT(Error({.extents = {4}, .dists = {bc(kMax / 2)}, .grid = {3}}),
             Catch::Contains("dimension 0: block 9223372036854775807 times 3 processes overflows"));
  CHECK_THAT(Error({.extents = {4}, .dists = {{static_cast<DistKind>(9), 1}}, .grid = {1}}),
             Catch::Contains("unknown distribution kind 9"));
}

TEST_CASE("BLOCK and CYCLIC are block-cyclic with block ceil(n/p) and 1") {
  const Distribution d = Make({.extents = {10, 7},
                               .dists = {DimDistribution::Block(), DimDistribution::Cyclic()},
                               .grid = {4, 3}});
  CHECK(d.dim(0).block == 3);
  CHECK(d.dim(1).block == 1);
  // 10 over 4 in blocks of 3: 3, 3, 3, 1; 7 cyclic over 3: 3, 2, 2.
  CHECK(d.dim(0).LocalExtent(0) == 3);
  CHECK(d.dim(0).LocalExtent(3) == 1);
  CHECK(d.dim(1).LocalExtent(0) == 3);
  CHECK(d.dim(1).LocalExtent(2) == 2);
  CHECK(d.ToString() == "[10x7] BLOCKxCYCLIC over 4x3 row-major");
  // More processes than blocks: the last ones own nothing.
  const Distribution sparse =
      Make({.extents = {5}, .dists = {DimDistribution::Block()}, .grid = {4}});
  CHECK(sparse.dim(0).block == 2);
  CHECK(sparse.LocalExtent(3).value()[0] == 0);
}

TEST_CASE("ranks are numbered in the grid order") {
  const auto bc = DimDistribution::BlockCyclic(2);
  const Distribution row = Make({.extents = {8, 8, 8}, .dists = {bc, bc, bc}, .grid = {2, 3, 4}});
  const Distribution col = Make({.extents = {8, 8, 8},
                                 .dists = {bc, bc, bc},
                                 .grid = {2, 3, 4},
                                 .order = GridOrder::kColumnMajor});
  CHECK(row.RankOf({1, 2, 3}) == 23);
  CHECK(col.RankOf({1, 2, 3}) == 1 + 2 * 2 + 3 * 6);
  CHECK(col.ToString() ==
        "[8x8x8] BLOCK_CYCLIC(2)xBLOCK_CYCLIC(2)xBLOCK_CYCLIC(2) over 2x3x4 "
        "column-major");
  for (uint64_t r = 0; r < 24; ++r) {
    CHECK(row.RankOf(row.CoordsOf(r)) == r);
    CHECK(col.RankOf(col.CoordsOf(r)) == r);
  }
  // The owner of (2, 5, 7): blocks (1, 2, 3) on grid coordinates (1, 2, 3).
  CHECK(row.Owner({2, 5, 7}).value() == 23);
  CHECK(col.Owner({2, 5, 7}).value() == 1 + 2 * 2 + 3 * 6);
}

TEST_CASE("every rank's local indices fill its local extent exactly once") {
  const auto bc = DimDistribution::BlockCyclic;
  for (GridOrder order : {GridOrder::kRowMajor, GridOrder::kColumnMajor}) {
    for (const DistributionSpec& base :
         {DistributionSpec{.extents = {17, 9}, .dists = {bc(3), bc(4)}, .grid = {3, 2}},
          DistributionSpec{.extents = {7, 5, 6},
          .dists = {DimDistribution::Block(), DimDistribution::Cyclic(), bc(5)},
          .grid = {3, 4, 2}},
          DistributionSpec{.extents = {11}, .dists = {bc(20)}, .grid = {5}}}) {
      DistributionSpec spec = base;
      spec.order = order;
      const Distribution d = Make(spec);
      INFO(d.ToString());
      std::vector<std::set<Index>> seen(d.rank_count());
      ForEachIndex(d.extents(), d.dims(), [&](const Index& g) {
        const uint64_t owner = d.Owner(g).value();
        const Index l = d.LocalIndex(g).value();
        const Index e = d.LocalExtent(owner).value();
        const Index c = d.CoordsOf(owner);
        for (int k = 0; k < d.dims(); ++k) {
          CHECK(l[k] < e[k]);
          CHECK(d.dim(k).Global(c[k], l[k]) == g[k]);
        }
        CHECK(seen[owner].insert(l).second);
      });
      for (uint64_t r = 0; r < d.rank_count(); ++r) {
        const Index e = d.LocalExtent(r).value();
        uint64_t n = 1;
        for (int k = 0; k < d.dims(); ++k) n *= e[k];
        CHECK(seen[r].size() == n);
      }
    }
  }
}

TEST_CASE("indices and ranks outside the distribution are OUT_OF_RANGE") {
  const Distribution d = Make({.extents = {4, 6},
                               .dists = {DimDistribution::Block(), DimDistribution::Block()},
                               .grid = {2, 2}});
  const auto owner = d.Owner({4, 0});
  REQUIRE_FALSE(owner.ok());
  CHECK(owner.status().code() == absl::StatusCode::kOutOfRange);
  CHECK_THAT(std::string(owner.status().message()),
             Catch::Contains("global index 4 in dimension 0 is outside [0, 4)"));
  CHECK_FALSE(d.LocalIndex({0, 6}).ok());
  const auto extent = d.LocalExtent(4);
  REQUIRE_FALSE(extent.ok());
  CHECK_THAT(std::string(extent.status().message()), Catch::Contains("rank 4 is outside [0, 4)"));
}

}  // namespace ISOMETRY_TEST_FILE
