// Throughput functions: interpolation in log2(request size), the monotonic
// envelope of the paper's footnote 2, and the inverse MinRequestFor.
#include "planner/throughput.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

TEST_CASE("throughput: constant and default functions") {
  const ThroughputFunction c = ThroughputFunction::Constant(5e9);
  CHECK(c.At(0) == 0);
  CHECK(c.At(1) == 5e9);
  CHECK(c.At(uint64_t{1} << 40) == 5e9);
  CHECK(c.Peak() == 5e9);
  CHECK(c.MinRequestFor(5e9) == uint64_t{1});
  CHECK(c.MinRequestFor(1) == uint64_t{1});
  CHECK(c.MinRequestFor(0) == uint64_t{1});
  CHECK_FALSE(c.MinRequestFor(5.0001e9).has_value());
  const ThroughputFunction d;
  CHECK(d.At(4096) == 1e9);
  CHECK(d == ThroughputFunction::Constant(1e9));
  CHECK_FALSE(d == c);
}

TEST_CASE("throughput: linear interpolation in log2 of the request size") {
  auto f = ThroughputFunction::FromSamples({{4096, 3e9}, {1024, 1e9}});  // any order
  REQUIRE(f.ok());
  CHECK(f->At(1024) == Approx(1e9));
  CHECK(f->At(2048) == Approx(2e9));  // halfway in log2
  CHECK(f->At(4096) == Approx(3e9));
  CHECK(f->At(uint64_t{1} << 30) == Approx(3e9));  // flat above the last sample
  CHECK(f->At(512) == Approx(0.5e9));              // proportional below the first
  CHECK(f->At(1) == Approx(1e9 / 1024));
  CHECK(f->Peak() == 3e9);
  CHECK(f->MinRequestFor(2e9) == uint64_t{2048});
  CHECK(f->MinRequestFor(0.5e9) == uint64_t{512});
  CHECK(f->MinRequestFor(3e9) == uint64_t{4096});
}

TEST_CASE("throughput: non-monotone samples become their running maximum (footnote 2)") {
  // Large requests of 4 KiB are slow here: split them into 2 KiB ones.
  auto f = ThroughputFunction::FromSamples({{1024, 1e9}, {2048, 4e9}, {4096, 2e9}, {8192, 6e9}});
  REQUIRE(f.ok());
  CHECK(f->At(4096) == Approx(4e9));
  CHECK(f->At(3000) == Approx(4e9));
  // From 4 KiB to 8 KiB the samples rise 2 -> 6 and cross 4 halfway
  // (2^12.5 bytes): flat before, rising after.
  CHECK(f->At(static_cast<uint64_t>(std::exp2(12.25))) == Approx(4e9));
  CHECK(f->At(static_cast<uint64_t>(std::exp2(12.75))) == Approx(5e9).epsilon(1e-3));
  CHECK(f->At(8192) == Approx(6e9));
  const auto bp = f->Breakpoints();
  REQUIRE(bp.size() == 4);
  CHECK(bp[2].request_bytes == 5793);  // round(2^12.5)
  CHECK(bp[2].bytes_per_second == Approx(4e9));
  CHECK(f->MinRequestFor(4e9) == uint64_t{2048});
}

TEST_CASE("throughput: sample validation") {
  CHECK(absl::IsInvalidArgument(ThroughputFunction::FromSamples({}).status()));
  CHECK(absl::IsInvalidArgument(ThroughputFunction::FromSamples({{0, 1e9}}).status()));
  CHECK(absl::IsInvalidArgument(ThroughputFunction::FromSamples({{8, -1}}).status()));
  CHECK(absl::IsInvalidArgument(ThroughputFunction::FromSamples({{8, NAN}}).status()));
  CHECK(absl::IsInvalidArgument(ThroughputFunction::FromSamples({{8, INFINITY}}).status()));
  // Repeated sizes keep the best measurement.
  auto f = ThroughputFunction::FromSamples({{64, 1e9}, {64, 2e9}});
  REQUIRE(f.ok());
  CHECK(f->At(64) == 2e9);
}

TEST_CASE("throughput: the per-request overhead model") {
  const double peak = 6e9, overhead = 2e-6;
  const ThroughputFunction f = ThroughputFunction::PerRequestOverhead(peak, overhead);
  for (int k = 0; k <= 40; k += 5) {
    const double r = std::ldexp(1.0, k);
    CHECK(f.At(uint64_t{1} << k) == Approx(r / (r / peak + overhead)));
  }
  // Between samples the log-linear interpolation stays within 3 % of the model.
  for (uint64_t r : {uint64_t{3000}, uint64_t{100000}, uint64_t{7} << 20}) {
    const double model = static_cast<double>(r) / (static_cast<double>(r) / peak + overhead);
    CHECK(f.At(r) == Approx(model).epsilon(0.03));
  }
  CHECK(f.Peak() == Approx(peak).epsilon(1e-6));
  CHECK(f.At(4096) < 0.5 * peak);  // "poor with small requests"
  CHECK(ThroughputFunction::PerRequestOverhead(peak, 0) == ThroughputFunction::Constant(peak));
}

TEST_CASE("throughput property: monotone, above the samples, exact inverse") {
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 200; ++iter) {
    std::vector<ThroughputSample> s;
    const int n = 1 + static_cast<int>(rng() % 10);
    for (int i = 0; i < n; ++i) {
      const uint64_t range = uint64_t{1} << (rng() % 40);
      s.push_back({1 + rng() % range, std::uniform_real_distribution<double>(0, 1e10)(rng)});
    }
    auto f = ThroughputFunction::FromSamples(s);
    REQUIRE(f.ok());
    // Monotone over a sweep, and never below a sample at or before r.
    double prev = 0;
    for (uint64_t r = 1; r < (uint64_t{1} << 42); r = r * 5 / 4 + 1) {
      const double v = f->At(r);
      CHECK(v >= prev);
      prev = v;
      for (const ThroughputSample& x : s) {
        if (x.request_bytes <= r) CHECK(v >= x.bytes_per_second * (1 - 1e-12));
      }
    }
    // At a sample point the envelope is the best sample at or below it.
    for (const ThroughputSample& x : s) {
      double best = 0;
      for (const ThroughputSample& y : s) {
        if (y.request_bytes <= x.request_bytes) best = std::max(best, y.bytes_per_second);
      }
      CHECK(f->At(x.request_bytes) == Approx(best).epsilon(1e-9));
    }
    CHECK(f->Peak() == Approx(std::max_element(s.begin(), s.end(), [](auto& a, auto& b) {
                                return a.bytes_per_second < b.bytes_per_second;
                              })->bytes_per_second));
    // MinRequestFor is the exact inverse: the first request reaching the target.
    for (int k = 0; k < 20; ++k) {
      const double target = std::uniform_real_distribution<double>(0, f->Peak())(rng);
      const std::optional<uint64_t> r = f->MinRequestFor(target);
      REQUIRE(r.has_value());
      CHECK(f->At(*r) >= target);
      if (*r > 1) CHECK(f->At(*r - 1) < target);
    }
    CHECK_FALSE(f->MinRequestFor(f->Peak() * 1.0001 + 1).has_value());
  }
}

}  // namespace ISOMETRY_TEST_FILE
