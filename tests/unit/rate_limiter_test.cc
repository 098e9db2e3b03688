#include "core/rate_limiter.h"

#include <catch2/catch.hpp>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace std::chrono;

TEST_CASE("the rate limiter books bytes/rate of channel time per request") {
  RateLimiter limiter(1'000'000);  // 1 MB/s
  const auto t0 = RateLimiter::Clock::now();
  const auto a = limiter.Reserve(500'000);
  const auto b = limiter.Reserve(250'000);
  // Bookings follow each other on one time line, so two threads together
  // never exceed the cap.
  CHECK(duration_cast<microseconds>(b - a).count() == 250'000);
  CHECK(a - t0 >= milliseconds(500));
  CHECK(a - t0 < milliseconds(600));
}

}  // namespace ISOMETRY_TEST_FILE
