// What the metrics count of client copies as they end
// (daemon/node/transfer_metrics.h): size classes at their edges, failures
// by code with cancellations left out, bytes by uid within the bound.
#include "daemon/node/transfer_metrics.h"

#include <catch2/catch.hpp>

namespace isometry {
namespace ISOMETRY_TEST_FILE {
namespace {

TEST_CASE("ended transfers: size classes, failures by code, bytes by uid, bounded") {
  TransferMetrics t;
  CHECK(TransferMetrics::SizeClass(0) == 0);
  CHECK(TransferMetrics::SizeClass((64 << 10) - 1) == 0);
  CHECK(TransferMetrics::SizeClass(64 << 10) == 1);
  CHECK(TransferMetrics::SizeClass(1 << 20) == 2);
  CHECK(TransferMetrics::SizeClass(64ull << 20) == 3);
  t.Record(OkStatus(), 4096, 0.001, 1000);
  t.Record(OkStatus(), 128ull << 20, 2.0, 1000);
  t.Record(absl::NotFoundError("x"), 4096, 0.1, 1000);
  t.Record(absl::CancelledError("x"), 4096, 0.1, 1000);  // not a failure
  for (int64_t uid = 0; uid < 300; ++uid) t.Record(OkStatus(), 1, 0, uid + 2000);
  const EndedTransfers e = t.Snapshot();
  REQUIRE(e.duration.size() == 4);
  CHECK(e.duration[0].count == 301);
  CHECK(e.duration[3].count == 1);
  CHECK(e.duration[3].sum == Approx(2.0));
  CHECK(e.failed.size() == 15);  // every code but OK and CANCELLED, at 0 or not
  for (const auto& [code, n] : e.failed) {
    CHECK(code != absl::StatusCode::kCancelled);
    CHECK(n == (code == absl::StatusCode::kNotFound ? 1u : 0u));
  }
  CHECK(e.bytes_by_uid.at(1000) == 4096 + (128ull << 20));
  CHECK(e.bytes_by_uid.size() == TransferMetrics::kMaxUids + 1);  // and "other"
  CHECK(e.bytes_by_uid.at(TransferMetrics::kOtherUids) == 300 - (TransferMetrics::kMaxUids - 1));
}

}  // namespace
}  // namespace ISOMETRY_TEST_FILE
}  // namespace isometry
