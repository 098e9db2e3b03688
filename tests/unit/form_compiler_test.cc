// layout/form_compiler: programs between canonical forms move exactly what
// MPI_Pack of the source then MPI_Unpack into the destination would (core
// Pack/Unpack as the oracle), stay compact for regular types, and refuse
// past their bounds.
#include "layout/form_compiler.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <numeric>

#include "layout/compiler.h"
#include "layout/executor.h"
#include "layout/form_cache.h"
#include "unit/form_expand.h"
#include "unit/random_datatype.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using isometry::testing::At;
using isometry::testing::Buffer;
using isometry::testing::BufferFor;

namespace {

const Datatype kByte = Datatype::Basic(BasicType::kByte);
const Datatype kDouble = Datatype::Basic(BasicType::kDouble);

Datatype Ok(Result<Datatype> r) {
  REQUIRE(r.ok());
  return *std::move(r);
}

FormCopy Compile(const Datatype& s, int64_t sc, const Datatype& d, int64_t dc) {
  auto r = CompileDatatypeCopy(s, sc, d, dc);
  INFO(s.ToString() << " x" << sc << " -> " << d.ToString() << " x" << dc << ": "
                    << r.status().message());
  REQUIRE(r.ok());
  return *std::move(r);
}

// A buffer holding `count` elements of t, and where its origin lies.

}  // namespace

TEST_CASE("random datatype pairs copy as Pack then Unpack") {
  testing::RandomDatatypes gen(2026);
  int checked = 0;
  for (int i = 0; i < 500; ++i) {
    const std::optional<testing::CopyCase> c = testing::RandomCopyCase(gen, 1, 9);
    if (!c) continue;
    const FormCopy fc = Compile(c->src, c->src_count, c->dst, c->dst_count);
    INFO(c->src.ToString() << " x" << c->src_count << " -> " << c->dst.ToString() << " x"
                           << c->dst_count);
    CHECK(fc.program.bytes == static_cast<uint64_t>(c->bytes));
    Buffer got = BufferFor(c->dst, c->dst_count, 9);
    ExecuteProgram(fc.program, At(c->source.bytes, c->source.origin + fc.src_shift),
                   reinterpret_cast<std::byte*>(got.bytes.data()) + got.origin + fc.dst_shift);
    REQUIRE(got.bytes == c->want.bytes);
    ++checked;
  }
  CHECK(checked > 250);
}

TEST_CASE("datatype <-> layout pairs the layout's AOS C order") {
  std::mt19937_64 rng(77);
  testing::RandomDatatypes gen(5);
  for (int i = 0; i < 200; ++i) {
    const int dims = static_cast<int>(rng() % 3) + 1;
    const Box bounds = isometry::testing::RandomBounds(rng, dims, 6);
    const FieldSpace fields = isometry::testing::RandomFields(rng, 3);
    const InstanceShape shape{bounds, fields, isometry::testing::RandomLayout(rng, bounds)};
    const Box box = isometry::testing::RandomSubBox(rng, bounds);
    const int64_t bytes = static_cast<int64_t>(box.volume() * fields.total_bytes());
    if (bytes == 0) continue;
    // The datatype side: contiguous bytes with holes, of the same size.
    const Datatype t = Ok(Datatype::Hvector(bytes, 1, 2, kByte));
    INFO(shape.layout.ToString() << " over " << ToString(bounds) << ", box " << ToString(box));
    // Oracle: the layout packed by hand, point by point, field by field.
    std::vector<uint8_t> inst(shape.total_bytes());
    for (size_t k = 0; k < inst.size(); ++k) inst[k] = static_cast<uint8_t>(k * 13 + 3);
    std::vector<uint8_t> packed;
    testing::ForEachPointC(box, [&](const std::array<int64_t, kMaxDims>& p) {
      for (size_t f = 0; f < fields.size(); ++f) {
        const uint64_t at = shape.OffsetOf(f, p);
        packed.insert(packed.end(), inst.begin() + static_cast<ptrdiff_t>(at),
                      inst.begin() + static_cast<ptrdiff_t>(at + fields.fields()[f].size));
      }
    });
    // layout -> datatype
    auto to = CompileLayoutToDatatype(shape, box, t, 1);
    REQUIRE(to.ok());
    Buffer got = BufferFor(t, 1, 0);
    Buffer want = got;
    REQUIRE(Unpack(packed, t, 1, want.bytes, want.origin).ok());
    ExecuteProgram(to->program, At(inst, to->src_shift),
                   reinterpret_cast<std::byte*>(got.bytes.data()) + got.origin + to->dst_shift);
    REQUIRE(got.bytes == want.bytes);
    // datatype -> layout, back into a zeroed instance
    auto from = CompileDatatypeToLayout(t, 1, shape, box);
    REQUIRE(from.ok());
    std::vector<uint8_t> back(inst.size(), 0);
    ExecuteProgram(from->program, At(got.bytes, got.origin + from->src_shift),
                   reinterpret_cast<std::byte*>(back.data()) + from->dst_shift);
    testing::ForEachPointC(box, [&](const std::array<int64_t, kMaxDims>& p) {
      for (size_t f = 0; f < fields.size(); ++f) {
        const uint64_t at = shape.OffsetOf(f, p);
        for (uint32_t b = 0; b < fields.fields()[f].size; ++b) {
          REQUIRE(back[at + b] == inst[at + b]);
        }
      }
    });
  }
}

TEST_CASE("layout <-> layout through forms moves what CompileCopy moves") {
  std::mt19937_64 rng(3);
  for (int i = 0; i < 100; ++i) {
    const int dims = static_cast<int>(rng() % 3) + 1;
    const Box bounds = isometry::testing::RandomBounds(rng, dims, 7);
    const FieldSpace fields = isometry::testing::RandomFields(rng, 4);
    const InstanceShape ss{bounds, fields, isometry::testing::RandomLayout(rng, bounds)};
    const InstanceShape ds{bounds, fields, isometry::testing::RandomLayout(rng, bounds)};
    const Box box = isometry::testing::RandomSubBox(rng, bounds);
    auto direct = CompileLayoutCopy(ss, ds, box);
    REQUIRE(direct.ok());
    auto sf = LayoutForm(ss, box);
    auto df = LayoutForm(ds, box);
    REQUIRE(sf.ok());
    REQUIRE(df.ok());
    auto via = CompileFormCopy(*sf, *df);
    REQUIRE(via.ok());
    CHECK(via->program.bytes == direct->program.bytes);
    const auto src = isometry::testing::Pattern(ss.total_bytes(), i);
    auto a = isometry::testing::Pattern(ds.total_bytes(), i + 1);
    auto b = a;
    ExecuteProgram(direct->program, src.data(), a.data());
    ExecuteProgram(via->program, src.data() + via->src_shift, b.data() + via->dst_shift);
    REQUIRE(a == b);
  }
}

TEST_CASE("regular copies compile to a handful of ops") {
  const Datatype v = Ok(Datatype::Vector(1 << 20, 8, 16, kByte));
  const Datatype c = Ok(Datatype::Contiguous(8 << 20, kByte));
  const FormCopy a = Compile(v, 1, c, 1);
  REQUIRE(a.program.ops.size() == 1);
  CHECK(a.program.ops[0].num_loops == 1);
  CHECK(a.program.ops[0].run_bytes == 8);
  CHECK(a.program.runs == (1u << 20));
  // Blocks of 8 against blocks of 16: one op; 12 against 8: a few.
  const Datatype v16 = Ok(Datatype::Vector(1 << 19, 16, 32, kByte));
  CHECK(Compile(v, 1, v16, 1).program.ops.size() == 1);
  const Datatype v12 = Ok(Datatype::Vector(1 << 16, 12, 24, kByte));
  const Datatype v8 = Ok(Datatype::Vector(3 << 15, 8, 16, kByte));
  const FormCopy odd = Compile(v12, 1, v8, 1);
  CHECK(odd.program.ops.size() <= 8);
  CHECK(odd.program.bytes == (12u << 16));
  // A 3-D subarray to contiguous: one op, two loops.
  const Datatype sub =
      Ok(Datatype::Subarray(std::vector<int64_t>{40, 30, 20}, std::vector<int64_t>{10, 5, 6},
                            std::vector<int64_t>{1, 2, 3}, ArrayOrder::kC, kDouble));
  const FormCopy s = Compile(sub, 1, Ok(Datatype::Contiguous(300, kDouble)), 1);
  REQUIRE(s.program.ops.size() == 1);
  CHECK(s.program.ops[0].num_loops == 2);
  CHECK(s.src_shift == (int64_t{1 * 30 + 2} * 20 + 3) * 8);
}

TEST_CASE("form copies refuse past their bounds and on size mismatch") {
  auto mismatch = CompileDatatypeCopy(kDouble, 2, kByte, 15);
  REQUIRE_FALSE(mismatch.ok());
  CHECK(absl::IsInvalidArgument(mismatch.status()));
  CHECK(std::string(mismatch.status().message()).find("16") != std::string::npos);
  // Irregular runs: more ops than the bound.
  std::mt19937_64 rng(1);
  std::vector<int64_t> len, disp;
  int64_t at = 0;
  for (int i = 0; i < 100'000; ++i) {
    len.push_back(static_cast<int64_t>(rng() % 3) + 1);
    disp.push_back(at);
    at += len.back() + static_cast<int64_t>(rng() % 5) + 1;
  }
  const Datatype irregular = Ok(Datatype::Hindexed(len, disp, kByte));
  auto ops = CompileDatatypeCopy(irregular, 1, kByte, irregular.size());
  REQUIRE_FALSE(ops.ok());
  CHECK(absl::IsResourceExhausted(ops.status()));
  // Blocks that do not refine each other, too many runs to pair.
  const Datatype v12 = Ok(Datatype::Vector(3 << 20, 12, 24, kByte));
  const Datatype v8 = Ok(Datatype::Vector(9 << 19, 8, 16, kByte));
  auto runs = CompileDatatypeCopy(v12, 1, v8, 1);
  REQUIRE_FALSE(runs.ok());
  CHECK(absl::IsResourceExhausted(runs.status()));
}

TEST_CASE("equivalent datatypes built differently share one cache entry") {
  FormProgramCache cache(8);
  const Datatype dst = Ok(Datatype::Contiguous(64, kByte));
  const Datatype a = Ok(Datatype::Contiguous(8, kDouble));
  const Datatype b = Ok(Datatype::Vector(2, 4, 4, kDouble));
  const Datatype c =
      Ok(Datatype::Subarray(std::vector<int64_t>{2, 4}, std::vector<int64_t>{2, 4},
                            std::vector<int64_t>{0, 0}, ArrayOrder::kFortran, kDouble));
  const CanonicalForm df = *DatatypeForm(dst, 1);
  std::shared_ptr<const FormCopy> first;
  for (const Datatype& t : {a, b, c}) {
    auto r = cache.Get(*DatatypeForm(t, 1), df);
    REQUIRE(r.ok());
    if (!first) {
      first = *r;
    }
    CHECK(*r == first);
  }
  CHECK(cache.size() == 1);
  CHECK(cache.hits() == 2);
  CHECK(cache.misses() == 1);
  // Another type is another entry; the oldest goes past the capacity.
  FormProgramCache small(1);
  REQUIRE(small.Get(*DatatypeForm(a, 1), df).ok());
  REQUIRE(small.Get(*DatatypeForm(Ok(Datatype::Vector(8, 1, 2, kDouble)), 1), df).ok());
  CHECK(small.size() == 1);
  REQUIRE(small.Get(*DatatypeForm(a, 1), df).ok());
  CHECK(small.misses() == 3);
  // Errors are not cached.
  CHECK_FALSE(small.Get(df, *DatatypeForm(kDouble, 1)).ok());
  CHECK(small.size() == 1);
}

TEST_CASE("an array of padded structs copies as a few looped ops") {
  const Datatype kInt = Datatype::Basic(BasicType::kInt32);
  const Datatype padded =
      Ok(Datatype::Struct(std::vector<int64_t>{1, 1, 1}, std::vector<int64_t>{0, 8, 16},
                          std::vector<Datatype>{kInt, kDouble, kInt}));
  const int64_t n = 1 << 20;
  const FormCopy big = Compile(padded, n, kByte, 16 * n);
  CHECK(big.program.ops.size() <= 2);
  CHECK(big.program.runs == 2 * static_cast<uint64_t>(n));
  // Correct bytes on a smaller array.
  const FormCopy fc = Compile(padded, 100, kByte, 1600);
  const Buffer src = BufferFor(padded, 100, 3);
  std::vector<uint8_t> want(1600), got(1600);
  REQUIRE(Pack(src.bytes, src.origin, padded, 100, want).ok());
  ExecuteProgram(fc.program, At(src.bytes, src.origin + fc.src_shift),
                 reinterpret_cast<std::byte*>(got.data()) + fc.dst_shift);
  CHECK(got == want);
}

}  // namespace ISOMETRY_TEST_FILE

namespace ISOMETRY_TEST_FILE {

// Issue #50, item 7: against SOA over fields of different sizes each field
// steps by its own size, so the program loops each op at its own step.
TEST_CASE("datatypes against SOA over fields of different sizes compile to a few ops") {
  const auto soa = [](int64_t points, const std::vector<Field>& f) {
    return InstanceShape{Box::FromExtents({points}), *FieldSpace::Make(f),
                         *Layout::Parse("x,F", 1)};
  };
  const Datatype kInt = Datatype::Basic(BasicType::kInt32);
  const Datatype padded =
      Ok(Datatype::Struct(std::vector<int64_t>{1, 1, 1}, std::vector<int64_t>{0, 8, 16},
                          std::vector<Datatype>{kInt, kDouble, kInt}));
  struct Case {
    Datatype type;
    InstanceShape shape;
    size_t max_ops;
  };
  const std::vector<Case> cases{
      {Ok(Datatype::Contiguous(int64_t{33000} * 8, kByte)),
       soa(33000, {{"a", 6}, {"b", 1}, {"c", 1}}), 3},
      {Ok(Datatype::Vector(30000, 1, 2, kDouble)), soa(48000, {{"a", 4}, {"b", 1}}), 32},
      {Ok(Datatype::Hvector(40000, 1, 56, padded)), soa(40000, {{"a", 13}, {"b", 3}}), 3},
  };
  for (const Case& c : cases) {
    INFO(c.type.ToString());
    auto to = CompileDatatypeToLayout(c.type, 1, c.shape, c.shape.bounds);
    INFO(to.status().message());
    REQUIRE(to.ok());
    CHECK(to->program.ops.size() <= c.max_ops);
    CHECK(to->program.bytes == c.shape.total_bytes());
    auto back = CompileLayoutToDatatype(c.shape, c.shape.bounds, c.type, 1);
    REQUIRE(back.ok());
    CHECK(back->program.ops.size() <= c.max_ops);
    // The bytes: Pack of the datatype lands in AOS C order.
    const Buffer src = BufferFor(c.type, 1, 11);
    std::vector<uint8_t> packed(static_cast<size_t>(c.type.size()));
    REQUIRE(Pack(src.bytes, src.origin, c.type, 1, packed).ok());
    std::vector<uint8_t> inst(c.shape.total_bytes(), 0);
    ExecuteProgram(to->program, At(src.bytes, src.origin + to->src_shift),
                   reinterpret_cast<std::byte*>(inst.data()) + to->dst_shift);
    size_t at = 0;
    bool same = true;
    for (int64_t x = 0; x < c.shape.bounds.hi[0]; ++x) {
      for (size_t f = 0; f < c.shape.fields.size(); ++f) {
        const size_t n = c.shape.fields.fields()[f].size;
        same = same && std::equal(packed.begin() + static_cast<ptrdiff_t>(at),
                                  packed.begin() + static_cast<ptrdiff_t>(at + n),
                                  inst.begin() + static_cast<ptrdiff_t>(c.shape.OffsetOf(f, {x})));
        at += n;
      }
    }
    CHECK(same);
  }
}

}  // namespace ISOMETRY_TEST_FILE
