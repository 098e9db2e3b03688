// The intersection algorithms (issue #18): ASPEN, classical and FALLS give
// the same canonical exchange set, and it lists exactly the elements a
// brute-force owner mapping finds, with the right local positions.
#include <catch2/catch.hpp>
#include <limits>
#include <random>

#include "redistribution/exchange.h"
#include "unit/redistribution_reference.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::redistribution;
// Not core/datatype.h's enum of the same name (a header of another file of
// this unity batch may bring it in).
using isometry::redistribution::Distribution;
using isometry::redistribution::testing::BruteForce;
using isometry::redistribution::testing::Element;
using isometry::redistribution::testing::Expand;

namespace {

constexpr Algorithm kAll[] = {Algorithm::kAspen, Algorithm::kClassical, Algorithm::kFalls};

Distribution Make(const DistributionSpec& spec) {
  auto d = Distribution::Make(spec);
  REQUIRE(d.ok());
  return *d;
}

DimDistribution RandomDist(std::mt19937_64& rng, uint64_t extent) {
  switch (rng() % 4) {
    case 0:
      return DimDistribution::Block();
    case 1:
      return DimDistribution::Cyclic();
    default:
      // Blocks that divide the extent, that do not, and that exceed it.
      return DimDistribution::BlockCyclic(1 + rng() % (extent + 3));
  }
}

DistributionSpec RandomSpec(std::mt19937_64& rng, const std::vector<uint64_t>& extents) {
  DistributionSpec s;
  s.extents = extents;
  for (uint64_t e : extents) {
    s.dists.push_back(RandomDist(rng, e));
    s.grid.push_back(1 + rng() % 8);
  }
  s.order = rng() % 2 ? GridOrder::kRowMajor : GridOrder::kColumnMajor;
  return s;
}

// Checks every algorithm against each other and brute force for the local
// ranks in `ranks` (all of them when empty).
void CheckAll(const Distribution& local, const Distribution& remote) {
  INFO("local " << local.ToString() << ", remote " << remote.ToString());
  const std::vector<std::vector<Element>> expected = BruteForce(local, remote);
  for (uint64_t r = 0; r < local.rank_count(); ++r) {
    INFO("local rank " << r);
    const ExchangeSet aspen = ComputeExchange(local, r, remote, Algorithm::kAspen).value();
    const ExchangeSet classical = ComputeExchange(local, r, remote, Algorithm::kClassical).value();
    const ExchangeSet falls = ComputeExchange(local, r, remote, Algorithm::kFalls).value();
    CHECK(aspen == classical);
    CHECK(aspen == falls);
    const std::vector<Element> got = Expand(aspen);
    CHECK(got.size() == expected[r].size());
    CHECK(got == expected[r]);
    CHECK(aspen.PieceCount() == aspen.Pieces().size());
  }
}

}  // namespace

TEST_CASE("the seed's figure 1: a 4x4 grid to a 3x3 grid with other blocks") {
  const auto bc = DimDistribution::BlockCyclic;
  CheckAll(Make({.extents = {40, 40}, .dists = {bc(3), bc(3)}, .grid = {4, 4}}),
           Make({.extents = {40, 40}, .dists = {bc(5), bc(4)}, .grid = {3, 3}}));
}

TEST_CASE("runs are merged: BLOCK to BLOCK on one process is one run") {
  const Distribution one =
      Make({.extents = {100}, .dists = {DimDistribution::Block()}, .grid = {1}});
  const Distribution cyc =
      Make({.extents = {100}, .dists = {DimDistribution::BlockCyclic(7)}, .grid = {1}});
  for (Algorithm a : kAll) {
    const ExchangeSet s = ComputeExchange(cyc, 0, one, a).value();
    REQUIRE(s.per_dim[0].runs.size() == 1);
    CHECK(s.per_dim[0].runs[0] == Run{.global = 0, .length = 100, .local = 0, .remote = 0});
  }
}

TEST_CASE("a rank that owns nothing sends nothing") {
  // 5 over 4 in blocks of 2: rank 3 is empty.
  const Distribution local = Make({.extents = {5, 3},
                                   .dists = {DimDistribution::Block(), DimDistribution::Block()},
                                   .grid = {4, 1}});
  const Distribution remote = Make({.extents = {5, 3},
                                    .dists = {DimDistribution::Cyclic(), DimDistribution::Cyclic()},
                                    .grid = {2, 2}});
  for (Algorithm a : kAll) {
    const ExchangeSet s = ComputeExchange(local, 3, remote, a).value();
    CHECK(s.empty());
    CHECK(s.PieceCount() == 0);
    CHECK(s.Pieces().empty());
  }
  CheckAll(local, remote);
}

TEST_CASE("random 1-D to 3-D cases agree with brute force, every local rank") {
  std::mt19937_64 rng(20260518);
  for (int round = 0; round < 240; ++round) {
    const int dims = 1 + round % 3;
    // Small enough for element-by-element checks of every rank.
    const uint64_t max_extent = dims == 1 ? 200 : dims == 2 ? 40 : 14;
    std::vector<uint64_t> extents;
    extents.reserve(dims);
    for (int d = 0; d < dims; ++d) extents.push_back(1 + rng() % max_extent);
    const Distribution local = Make(RandomSpec(rng, extents));
    const Distribution remote = Make(RandomSpec(rng, extents));
    CheckAll(local, remote);
  }
}

TEST_CASE("a 4-D case agrees with brute force") {
  const auto bc = DimDistribution::BlockCyclic;
  CheckAll(Make({.extents = {5, 6, 4, 7},
                 .dists = {bc(2), DimDistribution::Cyclic(), DimDistribution::Block(), bc(3)},
                 .grid = {2, 3, 2, 2},
                 .order = GridOrder::kColumnMajor}),
           Make({.extents = {5, 6, 4, 7},
                 .dists = {DimDistribution::Block(), bc(4), bc(1), bc(2)},
                 .grid = {3, 1, 4, 2}}));
}

TEST_CASE("extents and blocks near 2^64 do not wrap") {
  // Too big for brute force: the algorithms must agree, and each local
  // rank's runs must add up to its local extent.
  constexpr uint64_t kBig = std::numeric_limits<uint64_t>::max();
  const auto bc = DimDistribution::BlockCyclic;
  const std::vector<std::pair<DistributionSpec, DistributionSpec>> cases = {
      {{.extents = {kBig}, .dists = {DimDistribution::Block()}, .grid = {3}},
       {.extents = {kBig}, .dists = {bc(kBig / 5)}, .grid = {2}}},
      {{.extents = {kBig}, .dists = {bc(kBig - 7)}, .grid = {1}},
       {.extents = {kBig}, .dists = {bc(kBig / 3 + 11)}, .grid = {1}}},
      {{.extents = {kBig - 1}, .dists = {bc(uint64_t{1} << 62)}, .grid = {3}},
       {.extents = {kBig - 1}, .dists = {bc((uint64_t{1} << 61) + 5)}, .grid = {5}}},
  };
  for (const auto& [ls, rs] : cases) {
    const Distribution local = Make(ls);
    const Distribution remote = Make(rs);
    INFO("local " << local.ToString() << ", remote " << remote.ToString());
    for (uint64_t r = 0; r < local.rank_count(); ++r) {
      const ExchangeSet aspen = ComputeExchange(local, r, remote, Algorithm::kAspen).value();
      CHECK(aspen == ComputeExchange(local, r, remote, Algorithm::kClassical).value());
      CHECK(aspen == ComputeExchange(local, r, remote, Algorithm::kFalls).value());
      uint64_t total = 0;
      for (const Run& run : aspen.per_dim[0].runs) total += run.length;
      CHECK(total == local.LocalExtent(r).value()[0]);
    }
  }
}

TEST_CASE("mismatched distributions and bad ranks are refused") {
  const auto bc = DimDistribution::BlockCyclic;
  const Distribution a = Make({.extents = {10, 10}, .dists = {bc(2), bc(2)}, .grid = {2, 2}});
  const Distribution b = Make({.extents = {10, 11}, .dists = {bc(2), bc(2)}, .grid = {2, 2}});
  const Distribution c = Make({.extents = {10}, .dists = {bc(2)}, .grid = {2}});
  for (Algorithm alg : kAll) {
    INFO(AlgorithmName(alg));
    const auto diff = ComputeExchange(a, 0, b, alg);
    REQUIRE_FALSE(diff.ok());
    CHECK(diff.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(diff.status().message()),
               Catch::Contains("[10x10]") && Catch::Contains("[10x11]") &&
                   Catch::Contains("do not cover the same global index space"));
    CHECK_FALSE(ComputeExchange(a, 0, c, alg).ok());
    const auto rank = ComputeExchange(a, 4, a, alg);
    REQUIRE_FALSE(rank.ok());
    CHECK(rank.status().code() == absl::StatusCode::kOutOfRange);
    CHECK_THAT(std::string(rank.status().message()),
               Catch::Contains("local rank 4 is outside [0, 4)"));
  }
  const auto unknown = ComputeExchange(a, 0, a, static_cast<Algorithm>(7));
  REQUIRE_FALSE(unknown.ok());
  CHECK_THAT(std::string(unknown.status().message()),
             Catch::Contains("unknown intersection algorithm 7"));
}

}  // namespace ISOMETRY_TEST_FILE
