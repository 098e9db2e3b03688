// core/datatype: constructors' size/lb/extent/true extent on hand-computed
// cases (the expected values are also what MPICH 4.0 reports), argument and
// overflow errors, segment walking and Pack/Unpack.
#include "core/datatype.h"

#include <catch2/catch.hpp>
#include <limits>
#include <numeric>
#include <vector>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

const Datatype kChar = Datatype::Basic(BasicType::kChar);
const Datatype kInt = Datatype::Basic(BasicType::kInt32);
const Datatype kDouble = Datatype::Basic(BasicType::kDouble);
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

Datatype Ok(Result<Datatype> r) {
  REQUIRE(r.ok());
  return *std::move(r);
}

// size, lb, extent, true_lb, true_extent
void CheckBounds(const Datatype& t, int64_t size, int64_t lb, int64_t extent, int64_t true_lb,
                 int64_t true_extent) {
  INFO(t.ToString());
  CHECK(t.size() == size);
  CHECK(t.lb() == lb);
  CHECK(t.extent() == extent);
  CHECK(t.true_lb() == true_lb);
  CHECK(t.true_extent() == true_extent);
}

std::vector<Segment> Segs(const Datatype& t, int64_t count) {
  auto r = Segments(t, count, 1 << 20);
  REQUIRE(r.ok());
  return *r;
}

Datatype Struct(std::vector<int64_t> bl, std::vector<int64_t> d, std::vector<Datatype> t) {
  return Ok(Datatype::Struct(bl, d, t));
}

}  // namespace

TEST_CASE("basic types have their C sizes and alignments") {
  CheckBounds(kInt, 4, 0, 4, 0, 4);
  CHECK(Datatype::Basic(BasicType::kLongDouble).size() == 16);
  CHECK(BasicTypeAlignment(BasicType::kLongDouble) == 16);
  CHECK(BasicTypeAlignment(BasicType::kDouble) == 8);
  CHECK(kInt.ToString() == "int32");
}

TEST_CASE("contiguous, vector and hvector bounds") {
  CheckBounds(Ok(Datatype::Contiguous(3, kInt)), 12, 0, 12, 0, 12);
  CheckBounds(Ok(Datatype::Contiguous(0, kInt)), 0, 0, 0, 0, 0);
  CheckBounds(Ok(Datatype::Vector(2, 1, 2, kInt)), 8, 0, 12, 0, 12);
  CheckBounds(Ok(Datatype::Vector(3, 1, -2, kInt)), 12, -16, 20, -16, 20);
  // Blocklength 0 still spans the strides (MPICH).
  CheckBounds(Ok(Datatype::Vector(3, 0, 2, kInt)), 0, 0, 16, 0, 16);
  CheckBounds(Ok(Datatype::Vector(0, 1, 2, kInt)), 0, 0, 0, 0, 0);
  CheckBounds(Ok(Datatype::Hvector(2, 1, 5, kInt)), 8, 0, 9, 0, 9);
  CHECK(Ok(Datatype::Vector(4, 2, 2, kInt)).info().dense);
  CHECK(Ok(Datatype::Vector(2, 1, 2, kInt)).ToString() == "vector(2,1,8B; int32)");
}

TEST_CASE("indexed types skip zero-length blocks, indexed_block does not") {
  const std::vector<int64_t> bl{1, 0, 1};
  const std::vector<int64_t> d{0, 10, -2};
  CheckBounds(Ok(Datatype::Indexed(bl, d, kInt)), 8, -8, 12, -8, 12);
  const std::vector<int64_t> hd{0, 40, -8};
  CheckBounds(Ok(Datatype::Hindexed(bl, hd, kInt)), 8, -8, 12, -8, 12);
  const std::vector<int64_t> zero{0, 0};
  const std::vector<int64_t> zd{4, 16};
  CheckBounds(Ok(Datatype::Hindexed(zero, zd, kInt)), 0, 0, 0, 0, 0);
  const std::vector<int64_t> bd{1, 4};
  CheckBounds(Ok(Datatype::IndexedBlock(0, bd, kInt)), 0, 4, 12, 4, 12);
  const std::vector<int64_t> hb{0, 9};
  CheckBounds(Ok(Datatype::HindexedBlock(1, hb, kDouble)), 16, 0, 17, 0, 17);
}

TEST_CASE("struct pads its extent to the largest alignment unless all types are the same") {
  CheckBounds(Struct({1, 1}, {0, 8}, {kDouble, kChar}), 9, 0, 16, 0, 9);
  CheckBounds(Struct({1, 1}, {0, 9}, {kDouble, kDouble}), 16, 0, 17, 0, 17);
  CheckBounds(Struct({1, 1}, {-3, 5}, {kInt, Datatype::Basic(BasicType::kInt16)}), 6, -3, 12, -3,
              10);
  CheckBounds(Struct({1, 1}, {0, 2},
                     {Datatype::Basic(BasicType::kInt16), Datatype::Basic(BasicType::kLongDouble)}),
              18, 0, 32, 0, 18);
  // A zero-length entry adds no bounds or alignment but still makes the
  // struct heterogeneous.
  CheckBounds(Struct({1, 0}, {0, 8}, {kChar, kDouble}), 1, 0, 1, 0, 1);
  CheckBounds(Struct({1, 1, 0}, {0, 5, 20}, {kInt, kInt, kChar}), 8, 0, 12, 0, 9);
  CheckBounds(Struct({0, 0}, {0, 8}, {kChar, kDouble}), 0, 0, 0, 0, 0);
  const Datatype c2d = Ok(Datatype::Contiguous(2, kDouble));
  CheckBounds(Struct({1, 1}, {0, 9}, {c2d, c2d}), 32, 0, 25, 0, 25);
  CheckBounds(Struct({1, 1}, {0, 9}, {kDouble, c2d}), 24, 0, 32, 0, 25);
}

TEST_CASE("resized sets lb and extent and keeps the true bounds") {
  const Datatype r = Ok(Datatype::Resized(kInt, -1, 6));
  CheckBounds(r, 4, -1, 6, 0, 4);
  CheckBounds(Struct({1, 1}, {0, 6}, {r, r}), 8, -1, 12, 0, 10);
  CheckBounds(Struct({1, 1}, {0, 6}, {r, kChar}), 5, -1, 8, 0, 7);
  CheckBounds(Ok(Datatype::Resized(kInt, 0, -8)), 4, 0, -8, 0, 4);
  // count > 1 repeats at the extent.
  const Datatype r2 = Ok(Datatype::Resized(kInt, 0, 8));
  CHECK(Segs(r2, 3) == std::vector<Segment>{{0, 4}, {8, 4}, {16, 4}});
}

TEST_CASE("subarray in C and Fortran order") {
  const std::vector<int64_t> sizes{4, 5, 6};
  const std::vector<int64_t> subs{2, 2, 3};
  const std::vector<int64_t> starts{1, 2, 3};
  const Datatype c = Ok(Datatype::Subarray(sizes, subs, starts, ArrayOrder::kC, kInt));
  CheckBounds(c, 48, 0, 480, 180, 156);
  const Datatype f = Ok(Datatype::Subarray(sizes, subs, starts, ArrayOrder::kFortran, kInt));
  CheckBounds(f, 48, 0, 480, 276, 184);
  const std::vector<int64_t> zero{2, 0, 3};
  CheckBounds(Ok(Datatype::Subarray(sizes, zero, starts, ArrayOrder::kC, kInt)), 0, 0, 480, 0, 0);
  // 2x3 in a 4x4 of chars starting at (1,1): rows are runs of 3.
  const std::vector<int64_t> s2{4, 4}, ss2{2, 3}, st2{1, 1};
  const Datatype m = Ok(Datatype::Subarray(s2, ss2, st2, ArrayOrder::kC, kChar));
  CHECK(Segs(m, 1) == std::vector<Segment>{{5, 3}, {9, 3}});
  CHECK(Segs(m, 2) == std::vector<Segment>{{5, 3}, {9, 3}, {21, 3}, {25, 3}});
}

TEST_CASE("darray block, cyclic and block-cyclic with default dargs") {
  const std::vector<int64_t> gs{10, 7}, da{kDefaultDarg, 2}, ps{3, 2};
  const std::vector<Distribution> ds{Distribution::kBlock, Distribution::kCyclic};
  // (size, true_lb, true_extent) per rank, as MPICH computes them.
  const int64_t want[6][3] = {{64, 0, 108},   {48, 8, 104},  {64, 112, 108},
                              {48, 120, 104}, {32, 224, 52}, {24, 232, 48}};
  for (int r = 0; r < 6; ++r) {
    const Datatype t = Ok(Datatype::Darray(6, r, gs, ds, da, ps, ArrayOrder::kC, kInt));
    CheckBounds(t, want[r][0], 0, 280, want[r][1], want[r][2]);
  }
  const Datatype f = Ok(Datatype::Darray(6, 5, gs, ds, da, ps, ArrayOrder::kFortran, kInt));
  CheckBounds(f, 24, 0, 280, 112, 168);
  const std::vector<Distribution> none{Distribution::kNone, Distribution::kCyclic};
  const std::vector<int64_t> ps1{1, 2};
  CheckBounds(Ok(Datatype::Darray(2, 1, gs, none, da, ps1, ArrayOrder::kC, kInt)), 120, 0, 280, 8,
              272);
}

TEST_CASE("darrays of many dimensions stay within the description limits") {
  const std::vector<int64_t> gs(10, 3), da(10, 2), ps(10, 1);
  const std::vector<Distribution> ds(10, Distribution::kCyclic);
  const Datatype t = Ok(Datatype::Darray(1, 0, gs, ds, da, ps, ArrayOrder::kC, kInt));
  const int64_t bytes = int64_t{4} * 59049;  // 3^10 int32
  CheckBounds(t, bytes, 0, bytes, 0, bytes);
  CHECK(t.info().dense);
}

TEST_CASE("invalid arguments are errors that name the problem") {
  const std::vector<int64_t> one{1}, two{1, 2}, neg{-1};
  CHECK(Datatype::Contiguous(-1, kInt).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(Datatype::Vector(1, -1, 1, kInt).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(!Datatype::Indexed(one, two, kInt).ok());
  CHECK(!Datatype::Hindexed(neg, one, kInt).ok());
  CHECK(!Datatype::IndexedBlock(-1, one, kInt).ok());
  const std::vector<Datatype> types{kInt};
  CHECK(!Datatype::Struct(two, two, types).ok());
  const std::vector<int64_t> sz{4}, sub{3}, st{2}, empty;
  const auto bad = Datatype::Subarray(sz, sub, st, ArrayOrder::kC, kInt);
  REQUIRE(!bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("starts + subsizes <= sizes"));
  CHECK(!Datatype::Subarray(empty, empty, empty, ArrayOrder::kC, kInt).ok());
  const std::vector<int64_t> gs{10}, da{3}, ps{3}, dflt{kDefaultDarg};
  const std::vector<Distribution> block{Distribution::kBlock};
  CHECK(!Datatype::Darray(3, 0, gs, block, da, ps, ArrayOrder::kC, kInt).ok());    // 3*3 < 10
  CHECK(!Datatype::Darray(4, 0, gs, block, dflt, ps, ArrayOrder::kC, kInt).ok());  // grid 3 != 4
  CHECK(!Datatype::Darray(3, 3, gs, block, dflt, ps, ArrayOrder::kC, kInt).ok());  // rank
  const std::vector<Distribution> none{Distribution::kNone};
  CHECK(!Datatype::Darray(3, 0, gs, none, dflt, ps, ArrayOrder::kC, kInt).ok());
}

TEST_CASE("overflowing sizes and extents are errors, not wraps") {
  const Datatype big = Ok(Datatype::Contiguous(int64_t{1} << 40, kChar));
  CHECK(Datatype::Contiguous(int64_t{1} << 30, big).status().code() ==
        absl::StatusCode::kOutOfRange);
  CHECK(!Datatype::Vector(2, 1, kMax, kInt).ok());
  CHECK(!Datatype::Hvector(3, 1, kMax / 2, kInt).ok());
  CHECK(!Datatype::Resized(kInt, kMax, 1).ok());
  CHECK(!Datatype::Resized(kInt, 0, kMax).ok());
  const std::vector<int64_t> d{kMax};
  CHECK(!Datatype::Indexed(std::vector<int64_t>{1}, d, kInt).ok());
  const std::vector<int64_t> sz{int64_t{1} << 31, int64_t{1} << 31, 1 << 10};
  CHECK(!Datatype::Subarray(sz, sz, std::vector<int64_t>{0, 0, 0}, ArrayOrder::kC, kInt).ok());
  // Counts of a valid type that overflow are refused by the walkers.
  CHECK(!ForEachSegment(big, kMax, [](const Segment&) { return true; }).ok());
  CHECK(!SpanOfElements(kInt, -1).ok());
}

TEST_CASE("descriptions are bounded in depth and weight") {
  Datatype t = kInt;
  Status last;
  for (int i = 0; i < kMaxDatatypeDepth + 2 && last.ok(); ++i) {
    auto r = Datatype::Contiguous(1, t);
    last = r.status();
    if (r.ok()) {
      t = *r;
    }
  }
  CHECK(last.code() == absl::StatusCode::kResourceExhausted);
  // A DAG that doubles per level is counted with multiplicity.
  Datatype d = kInt;
  Status s;
  for (int i = 0; i < 30 && s.ok(); ++i) {
    auto r = Datatype::Struct(std::vector<int64_t>{1, 1}, std::vector<int64_t>{0, 64},
                              std::vector<Datatype>{d, d});
    s = r.status();
    if (r.ok()) {
      d = *r;
    }
  }
  CHECK(s.code() == absl::StatusCode::kResourceExhausted);
}

TEST_CASE("segments merge adjacent runs, stop early and respect the bound") {
  const Datatype v = Ok(Datatype::Vector(4, 1, 2, kInt));
  CHECK(Segs(v, 1) == std::vector<Segment>{{0, 4}, {8, 4}, {16, 4}, {24, 4}});
  // The extent is 28: element 2's first run continues element 1's last.
  CHECK(Segs(v, 2).size() == 7);
  const Datatype dense = Ok(Datatype::Vector(4, 2, 2, kInt));
  CHECK(Segs(dense, 3) == std::vector<Segment>{{0, 96}});
  int calls = 0;
  REQUIRE(ForEachSegment(v, 100, [&](const Segment&) { return ++calls < 3; }).ok());
  CHECK(calls == 3);
  CHECK(Segments(v, 100, 10).status().code() == absl::StatusCode::kResourceExhausted);
  // Out of order blocks are not merged backwards.
  const std::vector<int64_t> bl{1, 1}, d{4, 0};
  CHECK(Segs(Ok(Datatype::Hindexed(bl, d, kInt)), 1) == std::vector<Segment>{{4, 4}, {0, 4}});
}

TEST_CASE("pack and unpack round-trip and check the buffer bounds") {
  const Datatype v = Ok(Datatype::Vector(3, 1, -2, kInt));  // lb -16
  std::vector<uint8_t> buf(64);
  std::iota(buf.begin(), buf.end(), 0);
  std::vector<uint8_t> packed(12);
  REQUIRE(Pack(buf, 16, v, 1, packed).ok());
  CHECK(packed == std::vector<uint8_t>{16, 17, 18, 19, 8, 9, 10, 11, 0, 1, 2, 3});
  std::vector<uint8_t> back(64, 0);
  REQUIRE(Unpack(packed, v, 1, back, 16).ok());
  CHECK(back[0] == 0);
  CHECK(back[8] == 8);
  CHECK(back[19] == 19);
  CHECK(back[4] == 0);
  CHECK(Pack(buf, 15, v, 1, packed).code() == absl::StatusCode::kOutOfRange);
  CHECK(Pack(buf, 61, v, 1, packed).code() == absl::StatusCode::kOutOfRange);
  CHECK(Pack(buf, 16, v, 2, packed).code() == absl::StatusCode::kInvalidArgument);
  CHECK(Pack(buf, kMax, v, 1, packed).code() == absl::StatusCode::kOutOfRange);
}

}  // namespace ISOMETRY_TEST_FILE
