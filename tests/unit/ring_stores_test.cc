// How a memcpy hop writes the ring the next one reads (ring_stores.h):
// calibration's way first, the way not preferred tried at the third epoch
// and then one in kTryEvery, and the other way taken once it has cost
// clearly less, also when the machine changes its mind later.
#include "daemon/runtime/ring_stores.h"

#include <catch2/catch.hpp>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

// How many of the next `n` epochs stream.
int StreamedOf(RingStores& r, int n) {
  int streamed = 0;
  for (int i = 0; i < n; ++i) streamed += r.NextStreams() ? 1 : 0;
  return streamed;
}

// `n` epochs costing `cached` and `streamed` ns a byte, each written the
// way NextStreams picks.
void Run(RingStores& r, int n, double cached, double streamed) {
  for (int i = 0; i < n; ++i) {
    const bool s = r.NextStreams();
    r.Observe(s, s ? streamed : cached);
  }
}

TEST_CASE("rings start the way calibration found faster, and try the other now and then") {
  for (const bool first : {false, true}) {
    RingStores r(first);
    CHECK(r.Prefers() == first);
    const int n = 32 * static_cast<int>(RingStores::kTryEvery);
    // The third epoch, and one in kTryEvery.
    const int tries = 1 + 32;
    const int streamed = StreamedOf(r, n);
    CHECK(streamed == (first ? n - tries : tries));
    CHECK(r.epochs_timed() == 0);  // nothing observed: still calibration's way
    CHECK(r.Prefers() == first);
  }
}

TEST_CASE("a way that cost clearly less, once both were timed, writes the ring") {
  RingStores r(/*streams_first=*/false);
  Run(r, 4 * static_cast<int>(RingStores::kTryEvery), /*cached=*/0.3, /*streamed=*/0.1);
  CHECK(r.Prefers());
  CHECK(r.switches() == 1);
  // From then on, most epochs stream: picks 65 to 384 try cached at the
  // multiples of kTryEvery only.
  CHECK(StreamedOf(r, 320) == 320 - 20);
}

TEST_CASE("a way only a little cheaper does not take over") {
  RingStores r(/*streams_first=*/false);
  Run(r, 1000, /*cached=*/0.1, /*streamed=*/0.1 * (RingStores::kTurnBelow + 0.05));
  CHECK_FALSE(r.Prefers());
  CHECK(r.switches() == 0);
}

TEST_CASE("a change of the machine is followed both ways") {
  RingStores r(/*streams_first=*/true);
  Run(r, 200, 0.1, 0.3);  // cached cheaper
  CHECK_FALSE(r.Prefers());
  Run(r, 400, 0.3, 0.1);  // then streaming: seen on the tries, and taken
  CHECK(r.Prefers());
  Run(r, 400, 0.1, 0.3);  // and back
  CHECK_FALSE(r.Prefers());
  CHECK(r.switches() == 3);
  CHECK(r.epochs_timed() == 1000);
}

TEST_CASE("one slow chunk does not turn the choice, nor does a chunk with no time") {
  RingStores r(false);
  Run(r, 200, 0.1, 0.2);
  REQUIRE_FALSE(r.Prefers());
  r.Observe(false, 0.5);  // lost its CPU once
  CHECK_FALSE(r.Prefers());
  r.Observe(true, 0);  // not timed
  r.Observe(true, -1);
  CHECK(r.epochs_timed() == 201);
  // A new calibration starts from its own choice, the counts kept.
  r.Restart(true);
  CHECK(r.Prefers());
  CHECK(r.epochs_timed() == 201);
}

}  // namespace ISOMETRY_TEST_FILE
