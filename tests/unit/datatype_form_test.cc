// layout/datatype_form: equal packed streams <=> equal canonical forms (with
// core/datatype's Segments as the oracle), compact forms for regular trees,
// the bounds, and a pinned hash.
#include "layout/datatype_form.h"

#include <catch2/catch.hpp>

#include "unit/form_expand.h"
#include "unit/random_datatype.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using isometry::testing::Expand;

namespace {

const Datatype kByte = Datatype::Basic(BasicType::kByte);
const Datatype kInt = Datatype::Basic(BasicType::kInt32);
const Datatype kDouble = Datatype::Basic(BasicType::kDouble);

Datatype Ok(Result<Datatype> r) {
  REQUIRE(r.ok());
  return *std::move(r);
}

CanonicalForm Form(const Datatype& t, int64_t count = 1) {
  auto f = DatatypeForm(t, count);
  INFO(t.ToString() << " x" << count << ": " << f.status().message());
  REQUIRE(f.ok());
  return *std::move(f);
}

std::vector<Segment> Segs(const Datatype& t, int64_t count) {
  auto r = Segments(t, count, 1 << 20);
  REQUIRE(r.ok());
  return *r;
}

// The same typemap written as one hindexed of bytes (forces the walk path).
Datatype Flat(const std::vector<Segment>& segs) {
  std::vector<int64_t> len, disp;
  for (const Segment& s : segs) {
    len.push_back(s.length);
    disp.push_back(s.offset);
  }
  return Ok(Datatype::Hindexed(len, disp, kByte));
}

std::string Describe(const CanonicalForm& f) {
  std::string out;
  for (const FormPiece& p : f.pieces) {
    out += "[" + std::to_string(p.offset) + " run " + std::to_string(p.run);
    for (const FormLoop& l : p.loops) {
      out += " (" + std::to_string(l.count) + "," + std::to_string(l.stride) + ")";
    }
    out += "]";
  }
  return out;
}

std::string Describe(const std::vector<Segment>& segs) {
  std::string out;
  for (const Segment& s : segs) {
    out += " " + std::to_string(s.offset) + ":" + std::to_string(s.length);
  }
  return out;
}

}  // namespace

TEST_CASE("equivalent datatypes built differently have one form and one hash") {
  const CanonicalForm four = Form(Ok(Datatype::Contiguous(4, kInt)));
  const std::vector<Datatype> same = {
      Ok(Datatype::Vector(1, 4, 4, kInt)),
      Ok(Datatype::Hvector(2, 2, 8, kInt)),
      Ok(Datatype::Vector(4, 1, 1, kInt)),
      Ok(Datatype::Struct(std::vector<int64_t>{1, 1, 1, 1}, std::vector<int64_t>{0, 4, 8, 12},
                          std::vector<Datatype>{kInt, kInt, kInt, kInt})),
      Ok(Datatype::Subarray(std::vector<int64_t>{2, 2}, std::vector<int64_t>{2, 2},
                            std::vector<int64_t>{0, 0}, ArrayOrder::kC, kInt)),
      Ok(Datatype::Resized(Ok(Datatype::Contiguous(16, kByte)), -8, 40)),
      Ok(Datatype::IndexedBlock(1, std::vector<int64_t>{0, 1, 2, 3}, kInt)),
      Ok(Datatype::Contiguous(2, Ok(Datatype::Contiguous(2, kInt)))),
  };
  for (const Datatype& t : same) {
    INFO(t.ToString());
    CHECK(Form(t) == four);
    CHECK(FormHash(Form(t)) == FormHash(four));
  }
  CHECK(four.pieces.size() == 1);
  CHECK(four.pieces[0].run == 16);
  CHECK(four.pieces[0].loops.empty());

  // A vector of vectors is one two-level vector; an indexed type with
  // regular displacements is a vector.
  const Datatype inner = Ok(Datatype::Vector(3, 2, 5, kInt));  // 8-byte runs, stride 20
  const Datatype nested = Ok(Datatype::Hvector(4, 1, 100, inner));
  const Datatype idx = Ok(Datatype::Hindexed(std::vector<int64_t>{1, 1, 1, 1},
                                             std::vector<int64_t>{0, 100, 200, 300}, inner));
  const CanonicalForm f = Form(nested);
  CHECK(f == Form(idx));
  REQUIRE(f.pieces.size() == 1);
  CHECK(f.pieces[0].run == 8);
  CHECK(f.pieces[0].loops == std::vector<FormLoop>{{4, 100}, {3, 20}});
  // Count > 1 of the inner vector whose extent continues the stride: one loop.
  const Datatype strided = Ok(Datatype::Resized(inner, 0, 60));
  CHECK(Form(strided, 5) == Form(Ok(Datatype::Vector(15, 2, 5, kInt))));
  // A struct of int and double at 0 and 4 is one 12-byte run, repeated.
  const Datatype packed_struct =
      Ok(Datatype::Struct(std::vector<int64_t>{1, 1}, std::vector<int64_t>{0, 4},
                          std::vector<Datatype>{kInt, kDouble}));
  const Datatype aos = Ok(Datatype::Resized(packed_struct, 0, 16));
  CHECK(Form(aos, 10) == Form(Ok(Datatype::Vector(10, 12, 16, kByte))));
  // Different typemaps, different forms.
  CHECK_FALSE(Form(Ok(Datatype::Vector(4, 1, 2, kInt))) == four);
  CHECK_FALSE(FormHash(Form(Ok(Datatype::Vector(4, 1, 2, kInt)))) == FormHash(four));
}

TEST_CASE("random trees: forms expand to the typemap and equal streams have equal forms") {
  testing::RandomDatatypes gen(14);
  std::vector<std::pair<std::vector<Segment>, CanonicalForm>> seen;
  for (int i = 0; i < 600; ++i) {
    const Datatype t = gen.Next(static_cast<int>(gen.Int(1, 4)));
    const int64_t count = gen.Int(1, 3);
    INFO(t.ToString() << " x" << count);
    const CanonicalForm f = Form(t, count);
    const std::vector<Segment> segs = Segs(t, count);
    REQUIRE(Expand(f) == segs);
    CHECK(f.runs() == segs.size());
    // The walked description of the same typemap gives the same form.
    CHECK(Form(Flat(segs)) == f);
    for (const auto& [s, g] : seen) {
      if ((s == segs) != (g == f)) {
        FAIL_CHECK("streams equal " << (s == segs) << " but forms equal " << (g == f));
      }
    }
    if (seen.size() < 300) seen.emplace_back(segs, f);
  }
}

TEST_CASE("regular trees stay compact without expansion") {
  const Datatype v = Ok(Datatype::Vector(1 << 20, 8, 16, kByte));
  const CanonicalForm f = Form(v);
  REQUIRE(f.pieces.size() == 1);
  CHECK(f.pieces[0].loops == std::vector<FormLoop>{{1 << 20, 16}});
  CHECK(f.runs() == (1u << 20));
  CHECK(f.bytes() == (8u << 20));
  // 2^40 runs: would never finish if expanded.
  const Datatype big = Ok(Datatype::Hvector(1 << 20, 1, int64_t{1} << 24, v));
  const CanonicalForm g = Form(big);
  REQUIRE(g.pieces.size() == 1);
  CHECK(g.runs() == (uint64_t{1} << 40));
  const Datatype sub =
      Ok(Datatype::Subarray(std::vector<int64_t>{64, 64, 64}, std::vector<int64_t>{32, 16, 8},
                            std::vector<int64_t>{1, 2, 3}, ArrayOrder::kC, kDouble));
  const CanonicalForm s = Form(sub);
  REQUIRE(s.pieces.size() == 1);
  CHECK(s.pieces[0].run == 64);
  CHECK(s.pieces[0].loops.size() == 2);
  CHECK(s.lowest() == (int64_t{1 * 64 + 2} * 64 + 3) * 8);
}

TEST_CASE("layout forms follow AOS C order") {
  const FieldSpace fs = *FieldSpace::Make({{"a", 4}, {"b", 8}});
  const Box bounds = Box::FromExtents({6, 10});
  const InstanceShape aos{bounds, fs, Layout::Aos(2)};
  const Box box = Box::FromExtents({3, 10});
  auto f = LayoutForm(aos, box);
  REQUIRE(f.ok());
  // The first three rows of an AOS array are one run.
  REQUIRE(f->pieces.size() == 1);
  CHECK(f->pieces[0].run == int64_t{3} * 10 * 12);
  const InstanceShape soa{bounds, FieldSpace::Uniform(2, 4), Layout::Soa(2)};
  auto g = LayoutForm(soa, box);
  REQUIRE(g.ok());
  REQUIRE(g->pieces.size() == 1);
  CHECK(g->pieces[0].loops == std::vector<FormLoop>{{30, 4}, {2, 240}});
  CHECK_FALSE(LayoutForm(aos, Box::FromExtents({7, 10})).ok());
}

TEST_CASE("random layouts: forms expand to the AOS C order walk") {
  std::mt19937_64 rng(41);
  for (int i = 0; i < 400; ++i) {
    const int dims = static_cast<int>(rng() % 3) + 1;
    const Box bounds = isometry::testing::RandomBounds(rng, dims, 6);
    const FieldSpace fields = isometry::testing::RandomFields(rng, 3);
    const InstanceShape shape{bounds, fields, isometry::testing::RandomLayout(rng, bounds)};
    const Box box = isometry::testing::RandomSubBox(rng, bounds);
    INFO(shape.layout.ToString() << " over " << ToString(bounds) << ", box " << ToString(box));
    std::vector<Segment> want;
    testing::ForEachPointC(box, [&](const std::array<int64_t, kMaxDims>& p) {
      for (size_t f = 0; f < fields.size(); ++f) {
        const auto at = static_cast<int64_t>(shape.OffsetOf(f, p));
        if (!want.empty() && want.back().offset + want.back().length == at) {
          want.back().length += fields.fields()[f].size;
        } else {
          want.push_back({at, fields.fields()[f].size});
        }
      }
    });
    auto f = LayoutForm(shape, box);
    REQUIRE(f.ok());
    if (box.empty()) want.clear();
    INFO(Describe(*f) << " want " << Describe(want));
    CHECK(Expand(*f) == want);
  }
}

TEST_CASE("arrays of padded structs are one group piece") {
  // {int a; double b; int c}: extent 24, runs of 4 (a) and 12 (b, c)
  // bytes alternate. ({int; double} is no such case: its double ends where
  // the next element's int starts, so the runs are 12 bytes every 16.)
  const Datatype padded =
      Ok(Datatype::Struct(std::vector<int64_t>{1, 1, 1}, std::vector<int64_t>{0, 8, 16},
                          std::vector<Datatype>{kInt, kDouble, kInt}));
  REQUIRE(padded.extent() == 24);
  const int64_t n = 1 << 22;  // past the walk bound: built without walking
  const CanonicalForm f = Form(padded, n);
  REQUIRE(f.pieces.size() == 1);
  const FormPiece& g = f.pieces[0];
  CHECK(g.loops == std::vector<FormLoop>{{n, 24}});
  REQUIRE(g.body.size() == 2);
  CHECK(g.body[0] == FormPiece{0, 4, {}, {}});
  CHECK(g.body[1] == FormPiece{8, 12, {}, {}});
  CHECK(f.runs() == 2 * static_cast<uint64_t>(n));
  CHECK(f.bytes() == 16 * static_cast<uint64_t>(n));
  // The same typemap as a contiguous type, and walked, is the same form.
  CHECK(Form(Ok(Datatype::Contiguous(100, padded))) == Form(padded, 100));
  CHECK(Form(Flat(Segs(padded, 100))) == Form(padded, 100));
  // A strided array of such arrays is walked into groups of groups.
  const Datatype rows = Ok(Datatype::Hvector(50, 10, 400, padded));
  const CanonicalForm r = Form(rows);
  CHECK(Expand(r) == Segs(rows, 1));
  REQUIRE(r.pieces.size() == 1);
  CHECK(r.pieces[0].loops == std::vector<FormLoop>{{50, 400}, {10, 24}});
  CHECK(r.pieces[0].body.size() == 2);
}

TEST_CASE("a shared irregular old type is built once, not once per block") {
  const Datatype padded =
      Ok(Datatype::Struct(std::vector<int64_t>{1, 1, 1}, std::vector<int64_t>{0, 8, 16},
                          std::vector<Datatype>{kInt, kDouble, kInt}));
  std::vector<int64_t> disp;
  int64_t at = 0;
  for (int i = 0; i < 300'000; ++i) {
    disp.push_back(at);
    at += 2 + i % 7;  // irregular gaps, in elements of 24 bytes
  }
  const Datatype many = Ok(Datatype::IndexedBlock(1, disp, padded));
  const CanonicalForm f = Form(many);
  CHECK(f.runs() == 600'000);
  CHECK(f.bytes() == uint64_t{300'000} * 16);
}

TEST_CASE("form bounds give ResourceExhausted") {
  // Runs of 1..9 bytes in turn: nothing chains, and the period (9 pieces)
  // is longer than a group's body may be.
  std::vector<int64_t> len, disp;
  for (int64_t i = 0; i < 9; ++i) {
    len.push_back(i + 1);
    disp.push_back(i * 11);
  }
  const Datatype odd = Ok(Datatype::Resized(Ok(Datatype::Hindexed(len, disp, kByte)), 0, 100));
  auto many_pieces = DatatypeForm(odd, 150'000);
  REQUIRE_FALSE(many_pieces.ok());
  CHECK(absl::IsResourceExhausted(many_pieces.status()));
  auto many_runs = DatatypeForm(odd, 250'000);
  REQUIRE_FALSE(many_runs.ok());
  CHECK(absl::IsResourceExhausted(many_runs.status()));
  CHECK(DatatypeForm(odd, 1000).ok());
}

TEST_CASE("the form hash is pinned") {
  CanonicalForm f;
  f.pieces.push_back(FormPiece{-8, 16, {{4, 100}, {3, 20}}, {}});
  f.pieces.push_back(FormPiece{1000, 3, {}, {}});
  f.pieces.push_back(FormPiece{2000, 0, {{5, 16}}, {{0, 4, {}, {}}, {8, 8, {}, {}}}});
  CHECK(SerializeForm(f).size() == 8 + 8 + 5 * 32 + 3 * 16);
  // FNV-1a 64 of the serialization, computed independently (Python).
  CHECK(FormHash(f) == 0x91c0059f09447633ull);
  CHECK(FormHash(CanonicalForm{}) != FormHash(f));
}

}  // namespace ISOMETRY_TEST_FILE
