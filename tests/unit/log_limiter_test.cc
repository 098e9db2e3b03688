#include "core/log_limiter.h"

#include <catch2/catch.hpp>
#include <string>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using std::chrono::seconds;

TEST_CASE("LogLimiter lets N lines per key through per interval, then counts") {
  LogLimiter limiter(3, seconds(10));
  const auto t0 = LogLimiter::Clock::time_point{} + seconds(100);
  for (int i = 0; i < 3; ++i) {
    const auto v = limiter.Allow("uid 1000", t0);
    CHECK(v.log);
    CHECK(v.suppressed == 0);
  }
  for (int i = 0; i < 500; ++i) CHECK_FALSE(limiter.Allow("uid 1000", t0 + seconds(9)).log);
  // Another client is not silenced by the first one's flood.
  CHECK(limiter.Allow("uid 1001", t0 + seconds(9)).log);
  // The next interval: the first line reports what was dropped, once.
  const auto next = limiter.Allow("uid 1000", t0 + seconds(10));
  CHECK(next.log);
  CHECK(next.suppressed == 500);
  const auto after = limiter.Allow("uid 1000", t0 + seconds(10));
  CHECK(after.log);
  CHECK(after.suppressed == 0);
}

TEST_CASE("LogLimiter tracks a bounded number of keys; newcomers share one limit") {
  LogLimiter limiter(1, seconds(10), 4);
  const auto t0 = LogLimiter::Clock::time_point{} + seconds(100);
  int logged = 0;
  // 10,000 distinct keys in one interval: 4 tracked, the rest limited
  // together, so at most 4 + 1 lines get through.
  for (int i = 0; i < 10000; ++i) logged += limiter.Allow("pid " + std::to_string(i), t0).log;
  CHECK(logged == 5);
  // Once their windows have passed, idle keys make room again.
  CHECK(limiter.Allow("pid new", t0 + seconds(20)).log);
}

}  // namespace ISOMETRY_TEST_FILE
