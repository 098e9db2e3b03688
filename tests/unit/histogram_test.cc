// Fixed-bucket histograms (core/histogram.h): which bucket a value falls
// in, cumulative counts, the sum, and observations from several threads.
#include "core/histogram.h"

#include <catch2/catch.hpp>
#include <thread>
#include <vector>

namespace isometry {
namespace ISOMETRY_TEST_FILE {
namespace {

constexpr double kBounds[] = {1, 2, 4};

TEST_CASE("a value on a bound counts in that bucket; above them all, in +Inf only") {
  Histogram h(kBounds);
  for (double v : {0.5, 1.0, 1.5, 4.0, 9.0}) h.Observe(v);
  const HistogramCounts c = h.Counts();
  REQUIRE(c.bounds.size() == 3);
  CHECK(c.cumulative == std::vector<uint64_t>{2, 3, 4, 5});
  CHECK(c.count == 5);
  CHECK(c.sum == Approx(16.0));
}

TEST_CASE("an empty histogram has every bucket at 0") {
  const HistogramCounts c = Histogram(kSecondsBounds).Counts();
  CHECK(c.cumulative.size() == std::size(kSecondsBounds) + 1);
  for (uint64_t n : c.cumulative) CHECK(n == 0);
  CHECK(c.count == 0);
  CHECK(c.sum == 0);
}

TEST_CASE("observations from many threads are all counted") {
  Histogram h(kSecondsBounds);
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&h] {
      for (int i = 0; i < 10000; ++i) h.Observe(1e-3);
    });
  }
  for (auto& t : threads) t.join();
  const HistogramCounts c = h.Counts();
  CHECK(c.count == 40000);
  CHECK(c.cumulative.back() == c.count);
  CHECK(c.sum == Approx(40.0));
}

}  // namespace
}  // namespace ISOMETRY_TEST_FILE
}  // namespace isometry
