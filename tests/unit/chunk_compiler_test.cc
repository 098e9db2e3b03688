// layout/chunk_compiler and layout/copy_end: a copy cut into chunks moves
// every byte where the two ends' streams say, whichever compiler the pair
// of ends needs, directly or through a dense slot as the runtime's hops
// do; layout ends stay with the layout compiler's store; chunks of one
// pattern share a program; ends that cannot be paired are refused. The
// oracle is each end's byte -> storage map, walked independently of the
// compilers (the form's loops, the layout's points in row-major order).
#include "layout/chunk_compiler.h"

#include <catch2/catch.hpp>
#include <random>

#include "layout/executor.h"
#include "unit/form_expand.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;

namespace {

// `count` blocks of `block` bytes, `stride` apart, from offset `first`.
CanonicalForm Vector(int64_t first, int64_t count, int64_t block, int64_t stride) {
  FormPiece p{first, block, {}, {}};
  if (count > 1) p.loops.push_back({count, stride});
  return CanonicalForm{{p}};
}

std::vector<uint64_t> FormMap(const CanonicalForm& f) {
  std::vector<uint64_t> map;
  for (const FormPiece& p : f.pieces) {
    ForEachIteration(p, [&](int64_t off) {
      for (int64_t k = 0; k < p.run; ++k) map.push_back(static_cast<uint64_t>(off + k));
    });
  }
  return map;
}

// Row-major points, fields in order within each point.
std::vector<uint64_t> LayoutMap(const LayoutBox& l) {
  std::vector<uint64_t> map;
  for (int64_t x = l.box.lo[0]; x < l.box.hi[0]; ++x) {
    for (int64_t y = l.box.lo[1]; y < l.box.hi[1]; ++y) {
      for (size_t f = 0; f < l.shape.fields.size(); ++f) {
        const uint64_t at = l.shape.OffsetOf(f, {x, y});
        for (uint32_t k = 0; k < l.shape.fields.fields()[f].size; ++k) map.push_back(at + k);
      }
    }
  }
  return map;
}

std::vector<std::byte> Filled(size_t n, uint64_t seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + seed * 17 + 7) % 251);
  return v;
}

Box Range(uint64_t begin, uint64_t end) {
  Box b;
  b.dims = 1;
  b.lo[0] = static_cast<int64_t>(begin);
  b.hi[0] = static_cast<int64_t>(end);
  return b;
}

void Run(const ChunkProgram& c, const std::byte* src, std::byte* dst) {
  ExecuteProgram(*c.program, src + c.src_shift, dst + c.dst_shift);
}

}  // namespace

TEST_CASE("chunk compiler: form ends cut into chunks move every byte, directly or via a slot") {
  // Source: a vector of 12 blocks of 10 bytes, 24 apart (120 bytes, from
  // offset 6). Destination: SOA over fields of 4 and 1 bytes on a 4 x 6
  // box, described chunk by chunk (120 bytes too).
  const CanonicalForm vec = Vector(6, 12, 10, 24);
  auto src = MakeFormEnd(vec, 6 + 11 * 24 + 10, "the vector");
  const InstanceShape soa{Box::FromExtents({4, 6}), *FieldSpace::Make({{"a", 4}, {"b", 1}}),
                          *Layout::Parse("F,x,y", 2)};
  const LayoutBox box{soa, Box::FromExtents({4, 6})};
  auto dst = MakeLayoutChunksEnd(box, "the SOA instance");
  REQUIRE((src.ok() && dst.ok()));
  REQUIRE(MatchForms(src->get(), dst->get(), /*has_box=*/false).ok());
  const std::vector<uint64_t> from = FormMap(vec), to = LayoutMap(box);
  REQUIRE(from.size() == 120);
  REQUIRE(to.size() == 120);

  const InstanceShape stream = StreamShape(120);
  const CopyEnd s{stream, src->get()}, d{stream, dst->get()}, slot{stream};
  ChunkCompiler compiler(16, 1 << 20, 16, 1 << 20);
  std::mt19937_64 rng(51);
  for (int round = 0; round < 40; ++round) {
    const std::vector<std::byte> storage = Filled((*src)->span, static_cast<uint64_t>(round));
    std::vector<std::byte> direct = Filled((*dst)->span, 99), staged = direct, want = direct;
    for (size_t i = 0; i < 120; ++i) want[to[i]] = storage[from[i]];
    for (uint64_t at = 0; at < 120;) {
      const uint64_t end = std::min<uint64_t>(120, at + 1 + rng() % 50);
      INFO("chunk [" << at << ", " << end << ")");
      auto pair = compiler.Get(s, d, Range(at, end));
      auto in = compiler.Get(s, slot, Range(at, end));
      auto out = compiler.Get(slot, d, Range(at, end));
      REQUIRE((pair.ok() && in.ok() && out.ok()));
      CHECK(pair->program->bytes == end - at);
      Run(*pair, storage.data(), direct.data());
      std::vector<std::byte> dense(end - at);
      Run(*in, storage.data(), dense.data());
      Run(*out, dense.data(), staged.data());
      at = end;
    }
    CHECK(direct == want);
    CHECK(staged == want);
  }
  CHECK(compiler.layouts().size() == 0);  // every pair had a form
}

TEST_CASE("chunk compiler: layout ends stay with the layout store; repeated patterns hit") {
  ChunkCompiler compiler(16, 1 << 20, 16, 1 << 20);
  const InstanceShape aos{Box::FromExtents({8}), *FieldSpace::Make({{"a", 4}, {"b", 4}}),
                          *Layout::Parse("x,F", 1)};
  const InstanceShape soa{aos.bounds, aos.fields, *Layout::Parse("F,x", 1)};
  for (int i = 0; i < 2; ++i) {
    auto p = compiler.Get({aos}, {soa}, aos.bounds);
    REQUIRE(p.ok());
    CHECK(p->src_shift == 0);
    CHECK(p->dst_shift == 0);
  }
  CHECK(compiler.layouts().misses() == 1);
  CHECK(compiler.layouts().hits() == 1);
  CHECK(compiler.forms().misses() == 0);

  // Chunks of 48 bytes of a vector of 8-byte blocks 16 apart: every chunk
  // is the same pattern moved, so one program serves them all.
  auto vec = MakeFormEnd(Vector(0, 64, 8, 16), uint64_t{64} * 16, "the vector");
  REQUIRE(vec.ok());
  const InstanceShape stream = StreamShape(512);
  for (uint64_t at = 0; at + 48 <= 480; at += 48) {
    auto c = compiler.Get({stream, vec->get()}, {stream}, Range(at, at + 48));
    REQUIRE(c.ok());
    CHECK(c->src_shift == at * 2);
  }
  CHECK(compiler.forms().misses() == 1);
  CHECK(compiler.forms().hits() == 9);
}

TEST_CASE("chunk compiler: a whole copy's program moves what its chunks move") {
  const CanonicalForm vec = Vector(6, 12, 10, 24);
  auto src = MakeFormEnd(vec, 280, "the vector");
  auto dst = MakeFormEnd(Vector(0, 4, 30, 40), 150, "the blocks");
  const InstanceShape soa{Box::FromExtents({4, 6}), *FieldSpace::Make({{"a", 4}, {"b", 1}}),
                          *Layout::Parse("F,x,y", 2)};
  auto chunked = MakeLayoutChunksEnd({soa, soa.bounds}, "the SOA instance");
  REQUIRE((src.ok() && dst.ok() && chunked.ok()));
  const InstanceShape stream = StreamShape(120);
  auto whole = CompileWhole({stream, src->get()}, {stream, dst->get()});
  REQUIRE(whole.ok());
  const std::vector<uint64_t> from = FormMap(vec), to = FormMap((*dst)->form);
  const std::vector<std::byte> storage = Filled(280, 3);
  std::vector<std::byte> got = Filled(150, 4), want = got;
  for (size_t i = 0; i < 120; ++i) want[to[i]] = storage[from[i]];
  ExecuteProgram(whole->program, storage.data() + whole->src_shift, got.data() + whole->dst_shift);
  CHECK(got == want);

  // Into a chunked layout: the dense stream, which its reader unpacks.
  auto staged = CompileWhole({stream, src->get()}, {stream, chunked->get()});
  REQUIRE(staged.ok());
  std::vector<std::byte> dense(120);
  ExecuteProgram(staged->program, storage.data() + staged->src_shift,
                 dense.data() + staged->dst_shift);
  for (size_t i = 0; i < 120; ++i) CHECK(dense[i] == storage[from[i]]);
  CHECK(CompileWhole({stream, chunked->get()}, {stream, src->get()}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(CompileWhole({stream, src->get()}, {stream}).status().code() ==
        absl::StatusCode::kInvalidArgument);

  const InstanceShape aos{soa.bounds, soa.fields, *Layout::Parse("x,y,F", 2)};
  auto layouts = CompileWhole({aos}, {soa});
  REQUIRE(layouts.ok());
  CHECK(layouts->program.bytes == 120);
}

TEST_CASE("copy ends: ends that cannot be paired are refused, naming what the user named") {
  auto a = MakeFormEnd(Vector(0, 4, 8, 16), 64, "vector a");
  auto b = MakeFormEnd(Vector(0, 3, 8, 16), 48, "vector b");
  REQUIRE((a.ok() && b.ok()));
  auto one_sided = MatchForms(a->get(), nullptr, false);
  CHECK(one_sided.code() == absl::StatusCode::kInvalidArgument);
  const Status sizes = MatchForms(a->get(), b->get(), false);
  CHECK(sizes.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(sizes.message()).find("vector a") != std::string::npos);
  CHECK(std::string(sizes.message()).find("vector b") != std::string::npos);
  CHECK(MatchForms(a->get(), a->get(), /*has_box=*/true).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(MatchForms(nullptr, nullptr, /*has_box=*/true).ok());

  ChunkCompiler compiler(4, 1 << 20, 4, 1 << 20);
  const InstanceShape stream = StreamShape(32);
  CHECK(compiler.Get({stream, a->get()}, {stream}, Box::FromExtents({4, 8})).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(compiler.Get({stream, a->get()}, {stream}, Range(8, 8)).status().code() ==
        absl::StatusCode::kInvalidArgument);

  // A form reaching past its storage is the node's bug, never copied.
  CHECK(MakeFormEnd(Vector(0, 4, 8, 16), 55, "short").status().code() ==
        absl::StatusCode::kInternal);
  CHECK(MakeFormEnd(CanonicalForm{}, 8, "empty").status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("copy ends: storage, coverage, the far end's stand-in and the box") {
  auto gappy = MakeFormEnd(Vector(0, 4, 8, 16), 56, "gappy");
  auto whole = MakeFormEnd(Vector(0, 1, 56, 0), 56, "whole");
  REQUIRE((gappy.ok() && whole.ok()));
  const InstanceShape shape{Box::FromExtents({7}), *FieldSpace::Make({{"a", 8}}),
                            *Layout::Parse("x,F", 1)};
  CHECK(StorageBytes(shape, gappy->get()) == 56);
  CHECK(StorageBytes(shape, nullptr) == 56);
  CHECK_FALSE(CoversStorage(shape, gappy->get(), shape.bounds));
  CHECK(CoversStorage(shape, whole->get(), shape.bounds));
  CHECK(CoversStorage(shape, nullptr, shape.bounds));
  CHECK_FALSE(CoversStorage(shape, nullptr, Box::FromExtents({6})));

  auto far = FarEndForm(gappy->get());
  REQUIRE(far.ok());
  REQUIRE(*far != nullptr);
  CHECK((*far)->bytes == 32);
  CHECK((*far)->runs == 1);
  auto none = FarEndForm(nullptr);
  REQUIRE(none.ok());
  CHECK(*none == nullptr);
  CHECK_FALSE(CopyBox(gappy->get(), Box::FromExtents({3})).has_value());
  CHECK(CopyBox(nullptr, Box::FromExtents({3})) == Box::FromExtents({3}));
  CHECK(DescribeEnd(gappy->get(), "layout") == "gappy");
  CHECK(DescribeEnd(nullptr, "layout") == "layout");
}

}  // namespace ISOMETRY_TEST_FILE
