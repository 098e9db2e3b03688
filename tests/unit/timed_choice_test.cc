// Two ways timed as they run (client/cpp/timed_choice.h): both run first,
// the faster is kept, and the other is tried once an interval; scaled,
// the interval grows with how much slower the other way is, so trying it
// costs about the same share of the time however slow it is.
#include "client/cpp/timed_choice.h"

#include <catch2/catch.hpp>
#include <chrono>

namespace ISOMETRY_TEST_FILE {

using isometry::client::TimedChoice;
using std::chrono::nanoseconds;

namespace {

constexpr uint64_t kBytes = 64 << 10;

// Runs `n` times through `c`, way 0 taking `a` ns and way 1 `b`; how many
// went way 1.
int Run(TimedChoice& c, int n, int64_t a, int64_t b) {
  int ones = 0;
  for (int i = 0; i < n; ++i) {
    const int w = c.Next();
    ones += w;
    c.Took(w, kBytes, nanoseconds(w == 0 ? a : b));
  }
  return ones;
}

}  // namespace

TEST_CASE("both ways run their seed in turns before one is kept") {
  TimedChoice c(32);
  for (uint32_t i = 0; i < 2 * TimedChoice::kSeed; ++i) {
    const int w = c.Next();
    CHECK(w == static_cast<int>(i % 2));
    c.Took(w, kBytes, nanoseconds(w == 0 ? 1000 : 5000));
  }
  CHECK(c.CostOf(0) == Approx(1000.0 * 1024 / kBytes));
  CHECK(c.CostOf(1) == Approx(5000.0 * 1024 / kBytes));
  CHECK(c.Next() == 0);
}

TEST_CASE("plain exploration tries the slower way once an interval") {
  TimedChoice c(32);
  Run(c, 2 * TimedChoice::kSeed, 1000, 5000);
  CHECK(Run(c, 32 * 10, 1000, 5000) == 10);
}

TEST_CASE("scaled exploration tries a way k times slower k times less often") {
  TimedChoice c(32, /*scaled=*/true);
  Run(c, 2 * TimedChoice::kSeed, 1000, 5000);
  // Way 1 is 5 times slower: tried once in 160.
  CHECK(Run(c, 160 * 4, 1000, 5000) == 4);
  // Equal ways: once in 32, as plain exploration.
  TimedChoice e(32, true);
  Run(e, 2 * TimedChoice::kSeed, 1000, 1000);
  const int ones = Run(e, 32 * 8, 1000, 1000);
  CHECK(ones >= 8);  // one way or the other kept, the other tried 8 times
  CHECK(ones <= 32 * 8 - 8);
}

TEST_CASE("a way that becomes faster is kept in the end, however slow it was") {
  TimedChoice c(32, true);
  Run(c, 2 * TimedChoice::kSeed, 1000, 1000000);  // way 1: 1000 times slower
  // The interval is capped (64 times the plain one): way 1 is still tried.
  CHECK(Run(c, 32 * 64, 1000, 1000000) == 1);
  // Now way 1 is the faster: each try pulls its average down (a time is
  // counted as at most 4 times the average, so one preempted run cannot
  // pull it up).
  Run(c, 32 * 64 * 40, 1000, 100);
  CHECK(c.CostOf(1) < c.CostOf(0));
  CHECK(Run(c, 64, 1000, 100) >= 62);
}

TEST_CASE("nothing is learnt from a run of no bytes") {
  TimedChoice c(32);
  c.Took(0, 0, nanoseconds(5));
  CHECK(c.CostOf(0) == 0);
  CHECK(c.Next() == 0);
}

}  // namespace ISOMETRY_TEST_FILE
