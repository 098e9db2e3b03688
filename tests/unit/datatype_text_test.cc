// core/datatype_text: ToString -> ParseDatatype round trips for random trees
// and every constructor, the short positional forms users type, and the
// errors hostile or mistyped text gets (all InvalidArgument, with a column).
#include "core/datatype_text.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "unit/random_datatype.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

const Datatype kByte = Datatype::Basic(BasicType::kByte);
const Datatype kInt = Datatype::Basic(BasicType::kInt32);
const Datatype kDouble = Datatype::Basic(BasicType::kDouble);

Datatype Ok(Result<Datatype> r) {
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return *std::move(r);
}

void RoundTrips(const Datatype& t) {
  const std::string text = t.ToString(SIZE_MAX);
  INFO(text);
  const Datatype back = Ok(ParseDatatype(text));
  CHECK(SameType(back, t));
  CHECK(back.ToString(SIZE_MAX) == text);
  CHECK(back.size() == t.size());
  CHECK(back.lb() == t.lb());
  CHECK(back.extent() == t.extent());
}

// The error of a text that must not parse; its message is returned.
std::string Bad(std::string_view text) {
  const Result<Datatype> r = ParseDatatype(text);
  INFO(text);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  UNSCOPED_INFO(r.status().message());
  return std::string(r.status().message());
}

}  // namespace

TEST_CASE("every basic type parses by the name ToString prints") {
  for (int b = 0; b < kNumBasicTypes; ++b) {
    RoundTrips(Datatype::Basic(static_cast<BasicType>(b)));
  }
}

TEST_CASE("random trees round-trip through ToString") {
  testing::RandomDatatypes gen(14);
  for (int i = 0; i < 3000; ++i) {
    RoundTrips(gen.Next(1 + i % 4));
  }
}

TEST_CASE("every constructor round-trips, including empty and negative cases") {
  const int64_t lens[] = {2, 0, 1};
  const int64_t disps[] = {-3, 4, 9};
  const Datatype types[] = {kInt, kDouble, kByte};
  const Datatype resized = Ok(Datatype::Resized(kInt, -2, 12));
  RoundTrips(Ok(Datatype::Contiguous(0, kInt)));
  RoundTrips(Ok(Datatype::Vector(3, 2, -5, resized)));
  RoundTrips(Ok(Datatype::Vector(3, 2, 7, Ok(Datatype::Resized(kInt, 0, 0)))));
  RoundTrips(Ok(Datatype::Hvector(3, 2, 13, kDouble)));
  RoundTrips(Ok(Datatype::Indexed(lens, disps, resized)));
  RoundTrips(Ok(Datatype::Indexed({}, {}, kInt)));
  RoundTrips(Ok(Datatype::Hindexed(lens, disps, kDouble)));
  RoundTrips(Ok(Datatype::IndexedBlock(2, disps, kInt)));
  RoundTrips(Ok(Datatype::HindexedBlock(0, disps, kInt)));
  RoundTrips(Ok(Datatype::Struct(lens, disps, types)));
  RoundTrips(Ok(Datatype::Struct({}, {}, {})));
  RoundTrips(Ok(Datatype::Resized(resized, -100, -8)));
  const int64_t sizes[] = {4, 5, 6};
  const int64_t subs[] = {2, 0, 3};
  const int64_t starts[] = {1, 5, 0};
  RoundTrips(Ok(Datatype::Subarray(sizes, subs, starts, ArrayOrder::kFortran, kDouble)));
  RoundTrips(Ok(Datatype::Subarray(sizes, subs, starts, ArrayOrder::kC, resized)));
  const int64_t gsizes[] = {10, 7, 9};
  const Distribution dist[] = {Distribution::kBlock, Distribution::kCyclic, Distribution::kNone};
  const int64_t dargs[] = {4, kDefaultDarg, kDefaultDarg};
  const int64_t psizes[] = {3, 2, 1};
  const int64_t dflt[] = {kDefaultDarg, 2, kDefaultDarg};
  for (int rank = 0; rank < 6; ++rank) {
    RoundTrips(Ok(Datatype::Darray(6, rank, gsizes, dist, dargs, psizes, ArrayOrder::kC, kInt)));
    RoundTrips(
        Ok(Datatype::Darray(6, rank, gsizes, dist, dflt, psizes, ArrayOrder::kFortran, kByte)));
  }
}

TEST_CASE("a deep tree round-trips up to the depth limit") {
  Datatype t = kByte;
  for (int d = 1; d < kMaxDatatypeDepth; ++d) {
    t = Ok(Datatype::Contiguous(2, t));
  }
  RoundTrips(t);
}

TEST_CASE("short forms build the same types as the constructors") {
  struct Case {
    const char* text;
    Datatype want;
  };
  const int64_t lens[] = {1, 2};
  const int64_t edisps[] = {0, 3};
  const int64_t bdisps[] = {0, 12};
  const Datatype types[] = {kInt, kDouble};
  const int64_t sizes[] = {4, 6};
  const int64_t subs[] = {2, 3};
  const int64_t starts[] = {1, 0};
  const int64_t gsizes[] = {8};
  const Distribution cyc[] = {Distribution::kCyclic};
  const int64_t two[] = {2};
  const int64_t psizes[] = {2};
  const std::vector<Case> cases = {
      {"double", kDouble},
      {"contiguous(8192,byte)", Ok(Datatype::Contiguous(8192, kByte))},
      {" vector ( 1024 , 8 , 16 , byte ) ", Ok(Datatype::Vector(1024, 8, 16, kByte))},
      {"vector(4,1,2,int32)", Ok(Datatype::Vector(4, 1, 2, kInt))},
      {"vector(4,1,8B,int32)", Ok(Datatype::Vector(4, 1, 2, kInt))},
      {"hvector(4,1,6,int32)", Ok(Datatype::Hvector(4, 1, 6, kInt))},
      {"indexed([1,2],[0,3],int32)", Ok(Datatype::Indexed(lens, edisps, kInt))},
      {"indexed([1,2],[0B,12B],int32)", Ok(Datatype::Indexed(lens, edisps, kInt))},
      {"hindexed([1,2],[0,12],int32)", Ok(Datatype::Hindexed(lens, bdisps, kInt))},
      {"indexed_block(2,[0,3],int32)", Ok(Datatype::IndexedBlock(2, edisps, kInt))},
      {"hindexed_block(2,[0,12],int32)", Ok(Datatype::HindexedBlock(2, bdisps, kInt))},
      {"struct([1,2],[0,12],[int32,double])", Ok(Datatype::Struct(lens, bdisps, types))},
      {"subarray([4,6],[2,3],[1,0],fortran,double)",
       Ok(Datatype::Subarray(sizes, subs, starts, ArrayOrder::kFortran, kDouble))},
      {"subarray([4,6],[2,3],[1,0],c,double)",
       Ok(Datatype::Subarray(sizes, subs, starts, ArrayOrder::kC, kDouble))},
      {"darray(2,1,[8],[cyclic(2)],[2],c,int32)",
       Ok(Datatype::Darray(2, 1, gsizes, cyc, two, psizes, ArrayOrder::kC, kInt))},
      {"resized(-4,16,int32)", Ok(Datatype::Resized(kInt, -4, 16))},
      {"contiguous(2,\n\tvector(2,1,2,resized(0,8,int32)))",
       Ok(Datatype::Contiguous(2,
                               Ok(Datatype::Vector(2, 1, 2, Ok(Datatype::Resized(kInt, 0, 8))))))},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    const Datatype got = Ok(ParseDatatype(c.text));
    CHECK(SameType(got, c.want));
  }
}

TEST_CASE("bad text is InvalidArgument naming the column and what was expected") {
  CHECK(Bad("") == "datatype text, column 1: expected a datatype, got end of text");
  CHECK(Bad("int33") ==
        "datatype text, column 1: expected a datatype (unknown name 'int33'), "
        "got 'i'");
  CHECK(Bad("vektor(1,2,3,byte)").find("unknown constructor 'vektor'") != std::string::npos);
  CHECK(Bad("vector(1,2,3 x,byte)") == "datatype text, column 14: expected ',' or ';', got 'x'");
  CHECK(Bad("contiguous(2,byte").find("expected ')', got end of text") != std::string::npos);
  CHECK(Bad("contiguous(2,byte))").find("column 19: expected the end") != std::string::npos);
  CHECK(Bad("indexed([1,2],[0,3],int32").find("expected ')'") != std::string::npos);
  CHECK(Bad("indexed([1,2,[0,3],int32)").find("column 14: expected a number") != std::string::npos);
  CHECK(Bad("contiguous(-1,byte)").find("count must be >= 0") != std::string::npos);
  CHECK(Bad("contiguous(2,\x01)").find("byte 0x01") != std::string::npos);
  CHECK(Bad("struct([1,2],[0,4],[int32])").find("2 blocklengths but 1 types") != std::string::npos);
  CHECK(Bad("struct([1*int32],[0])").find("blocklengths like") != std::string::npos);
  CHECK(Bad("indexed([1@0B,2],[0],int32)").find("blocklengths like") != std::string::npos);
  CHECK(Bad("vector(2,1,6B,int32)").find("6B is not a whole number of elements") !=
        std::string::npos);
  CHECK(Bad("subarray([4],[2],[1],z,byte)").find("array order") != std::string::npos);
  CHECK(Bad("subarray(C,sizes=[4],subsize=[2],starts=[1];byte)")
            .find("expected 'subsizes=' or '['") != std::string::npos);
  CHECK(Bad("darray(2,1,[8],[blocky],[2],c,int32)").find("distribution") != std::string::npos);
}

TEST_CASE("abbreviated or cut ToString output is refused with a reason") {
  std::vector<int64_t> disps(20, 0);
  const Datatype big = Ok(Datatype::HindexedBlock(1, disps, kByte));
  CHECK(Bad(big.ToString()).find("abbreviated list") != std::string::npos);
  const Datatype deep = Ok(Datatype::Contiguous(3, Ok(Datatype::Vector(9, 1, 2, kInt))));
  CHECK(Bad(deep.ToString(20)).find("cut short") != std::string::npos);
}

TEST_CASE("huge numbers and overflowing arguments are errors, not crashes") {
  CHECK(Bad("contiguous(9223372036854775808,byte)") ==
        "datatype text, column 12: number does not fit a 64-bit integer");
  CHECK(Bad("contiguous(99999999999999999999999999,byte)").find("64-bit") != std::string::npos);
  CHECK(ParseDatatype("resized(-9223372036854775808,1,byte)").status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(Bad("vector(2,1,-9223372036854775808B,resized(0,-1,byte))").find("elements") !=
        std::string::npos);
  CHECK(Bad("contiguous(4611686018427387904,contiguous(4,byte))").find("overflow") !=
        std::string::npos);
  CHECK(Bad("vector(2,1,4611686018427387904,double)").find("overflow") != std::string::npos);
}

TEST_CASE("nesting and size limits hold before any recursion") {
  std::string deep;
  for (int i = 0; i < 50000; ++i) {
    deep += "contiguous(1,";
  }
  CHECK(Bad(deep).find("nesting deeper than 32") != std::string::npos);
  std::string ok = "byte";
  for (int i = 1; i < kMaxDatatypeDepth; ++i) {
    ok.insert(0, "contiguous(1,");
    ok += ")";
  }
  CHECK(ParseDatatype(ok).ok());
  CHECK(Bad("contiguous(1," + ok + ")").find("nesting deeper") != std::string::npos);
  std::string nested_struct(200000, '[');
  CHECK_FALSE(ParseDatatype("struct(" + nested_struct).ok());
  const std::string huge(kMaxDatatypeTextBytes + 1, ' ');
  CHECK(Bad(huge).find("exceeds the limit") != std::string::npos);
}

}  // namespace ISOMETRY_TEST_FILE
