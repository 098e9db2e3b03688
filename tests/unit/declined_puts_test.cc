#include "daemon/cluster/declined_puts.h"

#include <catch2/catch.hpp>

namespace ISOMETRY_TEST_FILE {

using isometry::cluster::DeclinedPuts;
using std::chrono::seconds;

TEST_CASE("a declined class stays off eager puts to that peer for the window, then comes back") {
  DeclinedPuts d;
  const DeclinedPuts::Clock::time_point t0{};
  CHECK_FALSE(d.Holds("b", "tenant", t0));
  CHECK(d.Remember("b", "tenant", t0));  // a new window: logged
  CHECK(d.Holds("b", "tenant", t0 + seconds(29)));
  // Another class, another peer: still puts.
  CHECK_FALSE(d.Holds("b", "open", t0 + seconds(1)));
  CHECK_FALSE(d.Holds("c", "tenant", t0 + seconds(1)));
  // Declined again within the window (a put that was in flight): not
  // logged again, and the window runs from now.
  CHECK_FALSE(d.Remember("b", "tenant", t0 + seconds(10)));
  CHECK(d.Holds("b", "tenant", t0 + seconds(39)));
  CHECK_FALSE(d.Holds("b", "tenant", t0 + DeclinedPuts::kWindow + seconds(10)));
  // After the window: the next decline starts (and logs) a new one.
  CHECK(d.Remember("b", "tenant", t0 + seconds(60)));
  CHECK(d.Count("b") == 3);
  CHECK(d.Count("c") == 0);
}

}  // namespace ISOMETRY_TEST_FILE
