// layout/layout_chunk: a chunk [begin, end) of a layout box's AOS C-order
// stream, as runs (LayoutRangeForm) and as a program against a dense slot
// (LayoutSlotProgram), is exactly those bytes. The oracle is independent
// of both: the stream's byte -> storage map, walked point by point in
// row-major order with InstanceShape::OffsetOf.
#include "layout/layout_chunk.h"

#include <catch2/catch.hpp>
#include <random>

#include "layout/executor.h"
#include "unit/form_expand.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;

namespace {

// Storage offset of every byte of the box's stream, in stream order.
std::vector<uint64_t> StreamMap(const LayoutBox& l) {
  std::vector<uint64_t> map;
  const Box& b = l.box;
  for (uint64_t i = 0; i < b.volume(); ++i) {
    std::array<int64_t, kMaxDims> x = b.lo;
    uint64_t rest = i;
    for (int d = b.dims - 1; d >= 0; --d) {
      x[d] = b.lo[d] + static_cast<int64_t>(rest % static_cast<uint64_t>(b.extent(d)));
      rest /= static_cast<uint64_t>(b.extent(d));
    }
    for (size_t f = 0; f < l.shape.fields.size(); ++f) {
      const uint64_t at = l.shape.OffsetOf(f, x);
      for (uint32_t k = 0; k < l.shape.fields.fields()[f].size; ++k) map.push_back(at + k);
    }
  }
  return map;
}

LayoutBox RandomLayout(std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  static const char* kLayouts[3][3] = {
      {"x,F", "F,x", "x,F"}, {"y,x,F", "F,y,x", "x,F,y"}, {"z,y,x,F", "F,z,y,x", "x,F,y,z"}};
  const int dims = static_cast<int>(pick(1, 3));
  std::vector<Field> fields;
  for (int64_t f = pick(1, 4); f > 0; --f) {
    fields.push_back({"f" + std::to_string(f), static_cast<uint32_t>(pick(1, 9))});
  }
  Box bounds, box;
  bounds.dims = box.dims = dims;
  for (int d = 0; d < dims; ++d) {
    bounds.lo[d] = pick(-3, 3);
    bounds.hi[d] = bounds.lo[d] + pick(1, 9);
    box.lo[d] = pick(bounds.lo[d], bounds.hi[d] - 1);
    box.hi[d] = pick(box.lo[d] + 1, bounds.hi[d]);
  }
  const InstanceShape shape{bounds, *FieldSpace::Make(fields),
                            *Layout::Parse(kLayouts[dims - 1][pick(0, 2)], dims)};
  REQUIRE(shape.Validate("shape").ok());
  return {shape, pick(0, 1) == 1 ? box : bounds};
}

std::vector<std::byte> Filled(size_t n, uint64_t seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + seed * 17 + 7) % 251);
  return v;
}

}  // namespace

TEST_CASE("layout chunks: runs and slot programs are exactly the stream's bytes") {
  std::mt19937_64 rng(50);
  for (int shape_case = 0; shape_case < 200; ++shape_case) {
    const LayoutBox l = RandomLayout(rng);
    const std::vector<uint64_t> map = StreamMap(l);
    REQUIRE(map.size() == l.bytes());
    INFO(l.shape.layout.ToString()
         << " over " << ToString(l.shape.bounds) << " box " << ToString(l.box));
    for (int r = 0; r < 12; ++r) {
      uint64_t begin = std::uniform_int_distribution<uint64_t>(0, map.size() - 1)(rng);
      uint64_t end = std::uniform_int_distribution<uint64_t>(begin + 1, map.size())(rng);
      if (r == 0) std::tie(begin, end) = std::pair<uint64_t, uint64_t>(0, map.size());
      INFO("[" << begin << ", " << end << ")");
      auto form = LayoutRangeForm(l, begin, end);
      REQUIRE(form.ok());
      std::vector<uint64_t> got;
      for (const FormPiece& p : form->pieces) {
        ForEachIteration(p, [&](int64_t off) {
          for (int64_t k = 0; k < p.run; ++k) got.push_back(static_cast<uint64_t>(off + k));
        });
      }
      CHECK(got == std::vector<uint64_t>(map.begin() + static_cast<ptrdiff_t>(begin),
                                         map.begin() + static_cast<ptrdiff_t>(end)));

      const size_t total = l.shape.total_bytes(), n = end - begin;
      auto in = LayoutSlotProgram(l, begin, end, /*to_layout=*/true);
      auto out = LayoutSlotProgram(l, begin, end, /*to_layout=*/false);
      REQUIRE((in.ok() && out.ok()));
      CHECK(in->bytes == n);
      const std::vector<std::byte> slot = Filled(n, 1), storage = Filled(total, 2);
      std::vector<std::byte> written = storage, want = storage, read(n), read_want(n);
      for (uint64_t k = begin; k < end; ++k) {
        want[map[k]] = slot[k - begin];
        read_want[k - begin] = storage[map[k]];
      }
      ExecuteProgram(*in, slot.data(), written.data());
      ExecuteProgram(*out, storage.data(), read.data());
      CHECK(written == want);
      CHECK(read == read_want);
    }
  }
}

TEST_CASE("layout chunks: a range outside the stream is OUT_OF_RANGE") {
  const LayoutBox l{
      {Box::FromExtents({10}), *FieldSpace::Make({{"a", 4}, {"b", 1}}), *Layout::Parse("x,F", 1)},
      Box::FromExtents({10})};
  CHECK(LayoutRangeForm(l, 0, 51).status().code() == absl::StatusCode::kOutOfRange);
  CHECK(LayoutSlotProgram(l, 7, 3, true).status().code() == absl::StatusCode::kOutOfRange);
  CHECK(LayoutSlotProgram(l, 0, 50, true).ok());
}

}  // namespace ISOMETRY_TEST_FILE
