// layout/form_restrict: a slice [begin, end) of a form's packed stream is
// exactly those bytes in pack order (random datatypes, random slices, the
// expanded runs as the oracle), and a copy compiled chunk by chunk from
// slices of both sides moves the same bytes as MPI_Pack + MPI_Unpack.
#include "layout/form_restrict.h"

#include <catch2/catch.hpp>
#include <numeric>

#include "layout/executor.h"
#include "layout/form_compiler.h"
#include "unit/form_expand.h"
#include "unit/random_datatype.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;

namespace {

// The runs of `all` (merged, pack order) that hold packed bytes [begin, end).
std::vector<Segment> SliceRuns(const std::vector<Segment>& all, int64_t begin, int64_t end) {
  std::vector<Segment> out;
  int64_t at = 0;
  for (const Segment& s : all) {
    const int64_t lo = std::max(begin, at), hi = std::min(end, at + s.length);
    if (lo < hi) Append(out, s.offset + (lo - at), hi - lo);
    at += s.length;
  }
  return out;
}

CanonicalForm FormOf(const Datatype& t, int64_t count) {
  auto f = DatatypeForm(t, count);
  REQUIRE(f.ok());
  return *std::move(f);
}

}  // namespace

TEST_CASE("restrict: a slice of the packed stream is exactly those bytes") {
  RandomDatatypes gen(31);
  std::mt19937_64& rng = gen.rng();
  for (int i = 0; i < 300; ++i) {
    const Datatype t = gen.Next(static_cast<int>(gen.Int(1, 4)));
    const int64_t count = gen.Int(1, 3);
    const CanonicalForm f = FormOf(t, count);
    const std::vector<Segment> all = Expand(f);
    const auto total = static_cast<int64_t>(f.bytes());
    INFO(t.ToString() << " x" << count);
    for (int k = 0; k < 10; ++k) {
      int64_t a = static_cast<int64_t>(rng() % static_cast<uint64_t>(total + 1));
      int64_t b = static_cast<int64_t>(rng() % static_cast<uint64_t>(total + 1));
      if (a > b) std::swap(a, b);
      auto r = RestrictForm(f, static_cast<uint64_t>(a), static_cast<uint64_t>(b));
      REQUIRE(r.ok());
      CHECK(r->bytes() == static_cast<uint64_t>(b - a));
      CHECK(Expand(*r) == SliceRuns(all, a, b));
    }
    // The whole stream is the form itself.
    CHECK(*RestrictForm(f, 0, static_cast<uint64_t>(total)) == f);
  }
  const CanonicalForm f = FormOf(*Datatype::Vector(4, 2, 3, Datatype::Basic(BasicType::kInt32)), 1);
  CHECK(RestrictForm(f, 3, 2).status().code() == absl::StatusCode::kOutOfRange);
  CHECK(RestrictForm(f, 0, f.bytes() + 1).status().code() == absl::StatusCode::kOutOfRange);
  CHECK(RestrictForm(f, 5, 5)->pieces.empty());
}

TEST_CASE("restrict: a copy compiled chunk by chunk equals pack + unpack") {
  RandomDatatypes gen(77);
  int checked = 0;
  for (int i = 0; i < 300; ++i) {
    const std::optional<CopyCase> c = RandomCopyCase(gen, 3, 5);
    if (!c) continue;
    INFO(c->src.ToString() << " x" << c->src_count << " -> " << c->dst.ToString() << " x"
                           << c->dst_count);
    const CanonicalForm sf = FormOf(c->src, c->src_count), df = FormOf(c->dst, c->dst_count);
    const int64_t l = c->bytes;
    Buffer got = BufferFor(c->dst, c->dst_count, 5);
    const int64_t chunk = gen.Int(1, l);
    for (int64_t a = 0; a < l; a += chunk) {
      const auto b = static_cast<uint64_t>(std::min(l, a + chunk));
      auto in = RestrictForm(sf, static_cast<uint64_t>(a), b);
      auto out = RestrictForm(df, static_cast<uint64_t>(a), b);
      REQUIRE(in.ok());
      REQUIRE(out.ok());
      auto fc = CompileFormCopy(*in, *out);
      REQUIRE(fc.ok());
      ExecuteProgram(fc->program, At(c->source.bytes, c->source.origin + fc->src_shift),
                     reinterpret_cast<std::byte*>(got.bytes.data()) + got.origin + fc->dst_shift);
    }
    REQUIRE(got.bytes == c->want.bytes);
    ++checked;
  }
  CHECK(checked > 150);
}

}  // namespace ISOMETRY_TEST_FILE
