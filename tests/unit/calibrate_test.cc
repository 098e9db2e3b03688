#include <catch2/catch.hpp>

#include "channels/calibrate.h"
#include "channels/channel_factory.h"

using namespace isometry;

TEST_CASE("calibration measures a converting channel's run sizes from 1 byte to 64 MiB") {
  ChannelConfig cc;
  cc.name = "memcpy0";
  auto ch = MakeChannel(cc);
  REQUIRE(ch.ok());
  auto samples = MeasureChannel(**ch, std::chrono::milliseconds(400));
  REQUIRE(samples.ok());
  REQUIRE(samples->size() == CalibrationSizes((*ch)->caps()).size());
  CHECK(samples->front().request_bytes == 1);
  CHECK(samples->back().request_bytes == 64ull << 20);
  for (const RateSample& s : *samples) CHECK(s.bytes_per_s > 0);
  // Long runs move faster than single bytes (the per-run cost the planner
  // weighs against layout changes).
  CHECK(samples->back().bytes_per_s > samples->front().bytes_per_s);
}

TEST_CASE("a rate-capped channel never measures above its cap, and stays in budget") {
  ChannelConfig cc;
  cc.name = "capped";
  cc.threads = 2;
  cc.rate_limit_bytes_per_s = 256ull << 20;
  auto ch = MakeChannel(cc);
  REQUIRE(ch.ok());
  const auto t0 = std::chrono::steady_clock::now();
  auto samples = MeasureChannel(**ch, std::chrono::milliseconds(800));
  const auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE(samples.ok());
  for (const RateSample& s : *samples) {
    INFO(s.request_bytes);
    CHECK(s.bytes_per_s <= 1.02 * static_cast<double>(cc.rate_limit_bytes_per_s));
  }
  // Large sizes are extrapolated at the cap rather than run for seconds.
  CHECK(took < std::chrono::seconds(3));
}
