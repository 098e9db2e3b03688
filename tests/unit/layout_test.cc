#include "core/layout.h"

#include <catch2/catch.hpp>

#include "core/instance.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {
std::string ErrorOf(const Result<Layout>& r) { return std::string(r.status().message()); }
}  // namespace

TEST_CASE("layouts parse, print and validate") {
  auto l = Layout::Parse("x_in=4, F, x_out, y", 2);
  REQUIRE(l.ok());
  CHECK(l->ToString() == "x_in=4,F,x_out,y");
  CHECK(l->block_of(0) == 4);
  CHECK(l->block_of(1) == 0);
  CHECK(Layout::Parse(l->ToString(), 2)->ToString() == l->ToString());
}

TEST_CASE("bad layouts are rejected with a message that names the problem") {
  CHECK_THAT(ErrorOf(Layout::Parse("F,x,F", 1)), Catch::Contains("exactly once"));
  CHECK_THAT(ErrorOf(Layout::Parse("x", 1)), Catch::Contains("found 0 times"));
  CHECK_THAT(ErrorOf(Layout::Parse("F,x", 2)), Catch::Contains("dimension y"));
  CHECK_THAT(ErrorOf(Layout::Parse("F,x,x_in=2,x_out", 1)), Catch::Contains("dimension x"));
  CHECK_THAT(ErrorOf(Layout::Parse("F,x_in=2", 1)), Catch::Contains("x_out"));
  CHECK_THAT(ErrorOf(Layout::Parse("F,x_in=0,x_out", 1)), Catch::Contains("at least 1"));
  CHECK_THAT(ErrorOf(Layout::Parse("F,x_in,x_out", 1)), Catch::Contains("blocking factor"));
  CHECK_THAT(ErrorOf(Layout::Parse("F,q", 1)), Catch::Contains("unknown component 'q'"));
  CHECK_THAT(ErrorOf(Layout::Parse("F,x,y", 1)),
             Catch::Contains("names 2 dimension(s) (x, y) but the index space has 1 (x)"));
  CHECK_THAT(ErrorOf(Layout::Parse("F,x", 5)), Catch::Contains("between 1 and 4"));
  CHECK_THAT(ErrorOf(Layout::Parse("F,,x", 1)), Catch::Contains("empty component"));
}

// Issue #21: every malformed blocking factor got "needs a blocking factor",
// and misspelled names got "only x_in takes =c".
TEST_CASE("a bad blocking factor or component name gets a message that says what is wrong") {
  const auto error = [](const char* text, int dims = 1) {
    return ErrorOf(Layout::Parse(text, dims));
  };
  CHECK_THAT(error("F,x_in=4x,x_out"), Catch::Contains("'4x' is not a number"));
  CHECK_THAT(error("F,x_in=4.5,x_out"), Catch::Contains("'4.5' is not a number"));
  CHECK_THAT(error("F,x_in=+4,x_out"), Catch::Contains("takes no sign (as in x_in=4)"));
  CHECK_THAT(error("F,x_in=-4,x_out"), Catch::Contains("must be at least 1"));
  CHECK_THAT(error("F,x_in= 4,x_out"), Catch::Contains("no spaces around '='"));
  CHECK_THAT(error("F,x_in =4,x_out"), Catch::Contains("no spaces around '='"));
  CHECK_THAT(error("F,x_in=0x10,x_out"), Catch::Contains("hexadecimal is not accepted"));
  CHECK_THAT(error("F,x_in=99999999999999999999,x_out"),
             Catch::Contains("too large (at most 2^62 = 4611686018427387904)"));
  CHECK_THAT(error("F,x_in=4611686018427387905,x_out"), Catch::Contains("too large"));
  CHECK(Layout::Parse("F,x_in=4611686018427387904,x_out", 1).ok());  // the limit itself parses
  CHECK_THAT(error("F,x_in=,x_out"), Catch::Contains("needs a blocking factor, as in x_in=4"));
  CHECK_THAT(error("F,x_in,x_out"), Catch::Contains("needs a blocking factor, as in x_in=4"));
  CHECK(error("F,x_in=0010,x_out").empty());  // leading zeros are still decimal

  CHECK_THAT(error("F,x_IN=4,x_out"),
             Catch::Contains("unknown component 'x_IN=4' (did you mean 'x_in=4'?"));
  CHECK_THAT(error("F,x-in=4,x_out"),
             Catch::Contains("unknown component 'x-in=4' (did you mean 'x_in=4'?"));
  CHECK_THAT(error("F,X"), Catch::Contains("(did you mean 'x'?"));
  CHECK_THAT(error("F,x,q", 2),
             Catch::Contains("the components of a 2-d layout are F, x, y, x_in=c, x_out, y_in=c, "
                             "y_out"));
  CHECK_THAT(error("F,x_out=4,x_in=4"), Catch::Contains("only x_in (y_in, ...) takes '=c', not "
                                                        "'x_out=4'"));
  CHECK_THAT(error("F=2,x"), Catch::Contains("takes '=c', not 'F=2'"));
  CHECK_THAT(error("F,x=4"), Catch::Contains("takes '=c', not 'x=4'"));
}

TEST_CASE("a layout for another number of dimensions says both counts") {
  CHECK_THAT(ErrorOf(Layout::Parse("F,x", 2)),
             Catch::Contains("names 1 dimension(s) but the index space has 2 (x, y): dimension "
                             "y is missing"));
  CHECK_THAT(ErrorOf(Layout::Parse("F,y_in=2,y_out,x,z", 2)),
             Catch::Contains("names 3 dimension(s) (x, y, z) but the index space has 2 (x, y): z "
                             "is not one of them"));
}

TEST_CASE("standard constructors") {
  CHECK(Layout::Aos(1).ToString() == "F,x");
  CHECK(Layout::Soa(1).ToString() == "x,F");
  CHECK(Layout::RowMajor(3).ToString() == "F,z,y,x");
  CHECK(Layout::ColumnMajor(3).ToString() == "F,x,y,z");
  CHECK(Layout::Soa(2).ToString() == "y,x,F");
  CHECK(Layout::Hybrid(1, 8)->ToString() == "x_in=8,F,x_out");
  CHECK(Layout::Blocked({4, 2})->ToString() == "F,y_in=2,x_in=4,y_out,x_out");
  CHECK(!Layout::Hybrid(1, 0).ok());
}

TEST_CASE("field spaces reject bad fields") {
  CHECK(!FieldSpace::Make({}).ok());
  CHECK(!FieldSpace::Make({{"a", 4}, {"a", 4}}).ok());
  CHECK(!FieldSpace::Make({{"a", 0}}).ok());
  CHECK(!FieldSpace::Make({{"", 4}}).ok());
  auto fs = FieldSpace::Make({{"a", 4}, {"b", 8}, {"c", 2}});
  REQUIRE(fs.ok());
  CHECK(fs->total_bytes() == 14);
  CHECK(fs->offset_of(2) == 12);
}

TEST_CASE("instances validate dimensions and size") {
  InstanceShape s{Box::FromExtents({10, 10}), FieldSpace::Uniform(1, 4), Layout::Aos(1)};
  CHECK_THAT(std::string(s.Validate("src").message()), Catch::Contains("has 1 dimension(s)"));
  InstanceShape huge{Box::FromExtents({1ll << 40, 1ll << 21}), FieldSpace::Uniform(1, 4),
                     Layout::Aos(2)};
  CHECK(!huge.Validate("src").ok());
  Box inverted = Box::FromExtents({4});
  inverted.lo[0] = 5;
  CHECK_THAT(std::string(inverted.Validate("box").message()), Catch::Contains("below lo"));
}

TEST_CASE("addressing follows the layout vector") {
  // AOS, 3 points x 2 fields {a:4, b:8}: entry = 12 bytes.
  const FieldSpace fs = *FieldSpace::Make({{"a", 4}, {"b", 8}});
  InstanceShape aos{Box::FromExtents({3}), fs, Layout::Aos(1)};
  CHECK(aos.total_bytes() == 36);
  CHECK(aos.OffsetOf(1, {2}) == 2 * 12 + 4);
  InstanceShape soa{Box::FromExtents({3}), fs, Layout::Soa(1)};
  CHECK(soa.OffsetOf(0, {2}) == 8);
  CHECK(soa.OffsetOf(1, {1}) == 12 + 8);
  // Hybrid with a block of 2 that does not divide 3: x_out = 2 blocks, the
  // last one padded; storage = 2 blocks * 2 points * 12 bytes.
  InstanceShape hyb{Box::FromExtents({3}), fs, *Layout::Hybrid(1, 2)};
  CHECK(hyb.total_bytes() == 48);
  CHECK(hyb.OffsetOf(0, {2}) == 24);         // block 1, point 0, field a
  CHECK(hyb.OffsetOf(1, {1}) == 2 * 4 + 8);  // block 0, field b starts after 2 a's
  // Index spaces need not start at zero.
  Box b = Box::FromExtents({3});
  b.lo[0] = 10;
  b.hi[0] = 13;
  InstanceShape shifted{b, fs, Layout::Aos(1)};
  CHECK(shifted.OffsetOf(0, {12}) == 24);
}

TEST_CASE("layout algebra reproduces the paper's Table 3 analysis") {
  // |F| = 16 bytes, x = 8192 points blocked by 2048, y = 4096 blocked by 1024.
  const Box bounds = Box::FromExtents({8192, 4096});
  const uint64_t F = 16;
  auto L = [](const char* t) { return *Layout::Parse(t, 2); };
  const Layout l0 = L("F,x_in=2048,x_out,y_in=1024,y_out");
  const Layout l1 = L("F,x_in=2048,y_in=1024,x_out,y_out");
  const Layout l2 = L("F,y_in=1024,x_in=2048,x_out,y_out");
  const Layout l4 = L("F,y_in=1024,y_out,x_in=2048,x_out");
  const uint64_t total = F * 8192 * 4096;
  CHECK(Total(l0, bounds, F) == total);
  CHECK(Prefix(l0, l1, bounds, F) == F * 2048);
  CHECK(SuffixBar(l0, l1, bounds, F) == total / 4);  // TOTAL / |y_out|
  CHECK(Prefix(l1, l2, bounds, F) == F);
  CHECK(SuffixBar(l1, l2, bounds, F) == F * 2048 * 1024);
  CHECK(Prefix(l2, l2, bounds, F) == total);
  CHECK(SuffixBar(l2, l2, bounds, F) == 1);
  CHECK(Prefix(l2, l4, bounds, F) == F * 1024);
  CHECK(SuffixBar(l2, l4, bounds, F) == total);
  CHECK(Suffix(l2, l4, bounds, F) == 1);
}

}  // namespace ISOMETRY_TEST_FILE
