// How the publisher of served reads picks the way it packs a piece
// (client/cpp/pack_chooser.h): both ways are timed first, the faster one
// is kept, the other tried one piece in kExplore, a change of the machine
// is followed within a few pieces, and one preempted piece does not flip
// the choice.
#include "client/cpp/pack_chooser.h"

#include <catch2/catch.hpp>
#include <chrono>

namespace ISOMETRY_TEST_FILE {

using namespace isometry::client;
using std::chrono::nanoseconds;

namespace {

constexpr uint64_t kPiece = 128 << 10;

// Runs `n` pieces of `kind` through `c`, each taking `staged` or `direct`
// nanoseconds by the way chosen; returns how many went direct.
int Run(PackChooser& c, int kind, int n, int64_t staged, int64_t direct) {
  int went_direct = 0;
  for (int i = 0; i < n; ++i) {
    const PackWay w = c.Next(kind);
    went_direct += w == PackWay::kDirect ? 1 : 0;
    c.Took(kind, w, kPiece, nanoseconds(w == PackWay::kStaged ? staged : direct));
  }
  return went_direct;
}

}  // namespace

TEST_CASE("pieces are kinds by their runs' average length") {
  CHECK(PackChooser::KindOf(kPiece, kPiece / 512) == PackChooser::kShortRuns);
  CHECK(PackChooser::KindOf(kPiece, kPiece / 8) == PackChooser::kShortRuns);
  CHECK(PackChooser::KindOf(kPiece, kPiece / 4096) == PackChooser::kLongRuns);
  CHECK(PackChooser::KindOf(kPiece, 1) == PackChooser::kLongRuns);
  CHECK(PackChooser::KindOf(0, 0) == PackChooser::kLongRuns);
}

TEST_CASE("each way is timed first, then the faster one is kept") {
  PackChooser c;
  // The first pieces take turns, so that both ways are known.
  CHECK(c.Next(0) == PackWay::kStaged);
  c.Took(0, PackWay::kStaged, kPiece, nanoseconds(3000));
  CHECK(c.Next(0) == PackWay::kDirect);
  c.Took(0, PackWay::kDirect, kPiece, nanoseconds(9000));
  CHECK(Run(c, 0, 2, 3000, 9000) == 1);
  CHECK(c.CostOf(0, PackWay::kStaged) == Approx(3000.0 * 1024 / kPiece));
  CHECK(c.CostOf(0, PackWay::kDirect) == Approx(9000.0 * 1024 / kPiece));
  // Staged is 3 times faster: it runs, but for one piece in kExplore.
  const int n = 10 * static_cast<int>(PackChooser::kExplore);
  CHECK(Run(c, 0, n, 3000, 9000) == 10);
}

TEST_CASE("a machine whose costs change is followed within a few pieces") {
  PackChooser c;
  const int explore = static_cast<int>(PackChooser::kExplore);
  Run(c, 0, 4 * explore, 3000, 9000);  // staged faster
  // Now direct is: the next explored piece shows it, and staged's own
  // pieces go up towards their new time. Within three rounds of
  // exploration the choice has moved.
  Run(c, 0, 3 * explore, 12000, 2000);
  CHECK(c.CostOf(0, PackWay::kDirect) < c.CostOf(0, PackWay::kStaged));
  CHECK(Run(c, 0, explore, 12000, 2000) == explore - 1);
}

TEST_CASE("one slow piece does not flip the choice; kinds are timed apart") {
  PackChooser c;
  Run(c, 1, 8, 4000, 2000);  // long runs: direct faster
  Run(c, 0, 8, 2000, 6000);  // short runs: staged faster
  REQUIRE(c.Next(1) == PackWay::kDirect);
  // A preempted piece takes 100 times as long: counted as at most 4 times
  // the estimate, a small step of the average.
  c.Took(1, PackWay::kDirect, kPiece, nanoseconds(200000));
  CHECK(c.CostOf(1, PackWay::kDirect) < c.CostOf(1, PackWay::kStaged));
  CHECK(c.Next(1) == PackWay::kDirect);
  CHECK(c.Next(0) == PackWay::kStaged);
  // Nothing is learnt from a piece of no bytes.
  const double before = c.CostOf(0, PackWay::kStaged);
  c.Took(0, PackWay::kStaged, 0, nanoseconds(5));
  CHECK(c.CostOf(0, PackWay::kStaged) == before);
}

}  // namespace ISOMETRY_TEST_FILE
