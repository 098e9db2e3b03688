// Edge values of boxes and instance shapes (issue #11, class 4): bounds
// near +-2^63 once made Box::extent overflow (signed) when another
// dimension was empty, and an ASan/UBSan daemon died on one ExplainPlan.
#include <catch2/catch.hpp>
#include <limits>

#include "core/instance.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

Box Make(std::initializer_list<std::pair<int64_t, int64_t>> dims) {
  Box b;
  for (const auto& [lo, hi] : dims) {
    b.lo[b.dims] = lo;
    b.hi[b.dims] = hi;
    ++b.dims;
  }
  return b;
}

std::string Error(const Status& s) { return std::string(s.message()); }

}  // namespace

TEST_CASE(
    "a box with int64 extreme bounds is INVALID_ARGUMENT, even when another dimension is empty") {
  // The reported case: dimension 0 empty, dimension 1 the whole int64 range.
  for (const Box& b :
       {Make({{0, 0}, {kMin, kMax}}), Make({{kMin, kMax}}), Make({{kMin, 0}}), Make({{0, kMax}}),
        Make({{kMin, kMin}}), Make({{kMax, kMax}}), Make({{5, 5}, {0, 1}, {kMin, kMin + 1}})}) {
    const Status s = b.Validate("bounds");
    INFO(ToString(b));
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(Error(s),
               Catch::Contains("lies outside [-4611686018427387903, 4611686018427387903]"));
  }
}

TEST_CASE("bounds at +-(2^62-1) are accepted while the span fits") {
  CHECK(Make({{-kMaxCoordinate, -kMaxCoordinate + 10}}).Validate("b").ok());
  CHECK(Make({{kMaxCoordinate - 10, kMaxCoordinate}}).Validate("b").ok());
  CHECK(Make({{0, kMaxCoordinate}}).Validate("b").ok());
  // Empty box at the edges: no point, still valid.
  CHECK(Make({{kMaxCoordinate, kMaxCoordinate}, {-kMaxCoordinate, -kMaxCoordinate}})
            .Validate("b")
            .ok());
  // The widest extent, 2^63 - 2, does not fit the span.
  const Status wide = Make({{-kMaxCoordinate, kMaxCoordinate}}).Validate("b");
  CHECK(wide.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(Error(wide), Catch::Contains("spans more than 2^62 points"));
}

TEST_CASE("an empty dimension counts as one point in the span") {
  // Volume 0, but the other extents multiply to 2^64: rejected, since
  // chunking and addressing multiply them regardless of the empty one.
  const Box b = Make({{0, 0}, {0, int64_t{1} << 32}, {0, int64_t{1} << 32}});
  CHECK(b.volume() == 0);
  const Status s = b.Validate("bounds");
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(Error(s), Catch::Contains("an empty dimension counted as 1"));
  // 2^31 x 2^31 with an empty dimension is fine.
  CHECK(Make({{0, 0}, {0, int64_t{1} << 31}, {0, int64_t{1} << 31}}).Validate("b").ok());
  // The widest accepted extent, 2^62, and one more.
  CHECK(Make({{-1, kMaxCoordinate}}).Validate("b").ok());
  CHECK(!Make({{-2, kMaxCoordinate}}).Validate("b").ok());
}

TEST_CASE("extent and volume of an unvalidated extreme box do not overflow") {
  // Only a wrong number (checked by UBSan in the sanitizer build), never UB.
  const Box b = Make({{0, 0}, {kMin, kMax}});
  CHECK(b.extent(1) == -1);  // 2^64 - 1 modulo 2^64
  CHECK(b.volume() == 0);
  CHECK(b.empty());
}

TEST_CASE("hi below lo and bad dimension counts stay INVALID_ARGUMENT") {
  CHECK(Make({{1, 0}}).Validate("b").code() == absl::StatusCode::kInvalidArgument);
  Box none;
  CHECK(none.Validate("b").code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("instance storage over 2^62 bytes, counting empty dimensions as 1, is INVALID_ARGUMENT") {
  const FieldSpace fs = FieldSpace::Uniform(1, 8);
  // 2^60 points x 8 bytes: 2^63 bytes.
  InstanceShape big{Make({{0, int64_t{1} << 60}}), fs, Layout::Aos(1)};
  CHECK(big.Validate("i").code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(Error(big.Validate("i")), Catch::Contains("exceeds 2^62 bytes"));
  // Empty in x, 2^60 in y: no storage, but strides of y would be 2^63.
  InstanceShape empty{Make({{0, 0}, {0, int64_t{1} << 60}}), fs, Layout::Aos(2)};
  CHECK(empty.Validate("i").code() == absl::StatusCode::kInvalidArgument);
  // A blocking factor of 2^62 over an empty dimension: padded blocks count.
  auto blocked = Layout::Parse("F,x_in=4611686018427387904,x_out", 1);
  REQUIRE(blocked.ok());
  InstanceShape padded{Make({{0, 0}}), fs, *blocked};
  CHECK(padded.Validate("i").code() == absl::StatusCode::kInvalidArgument);
  // The largest that fits: 2^59 points of 8 bytes.
  InstanceShape fits{Make({{-(int64_t{1} << 58), int64_t{1} << 58}}), fs, Layout::Aos(1)};
  CHECK(fits.Validate("i").ok());
  CHECK(fits.total_bytes() == uint64_t{1} << 62);
  CHECK(fits.OffsetOf(0, {(int64_t{1} << 58) - 1}) == (uint64_t{1} << 62) - 8);
}

TEST_CASE("layout sizes saturate instead of wrapping") {
  const FieldSpace fs = FieldSpace::Uniform(1, 16);
  auto l = Layout::Parse("F,x_in=4611686018427387904,x_out", 1);
  REQUIRE(l.ok());
  // 16 x 2^62 x 1: 2^66 would wrap to 0 and pass as a tiny buffer.
  CHECK(Total(*l, Make({{0, 1}}), fs.total_bytes()) == std::numeric_limits<uint64_t>::max());
  CHECK(Total(*l, Make({{0, 0}}), fs.total_bytes()) == 0);
  CHECK(Total(Layout::Aos(1), Make({{0, 10}}), 16) == 160);
}

}  // namespace ISOMETRY_TEST_FILE
