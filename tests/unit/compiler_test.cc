#include "layout/compiler.h"

#include <immintrin.h>

#include <catch2/catch.hpp>
#include <utility>
#include <vector>

#include "layout/executor.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;

namespace {

std::string RunAndCheck(const InstanceShape& ss, const InstanceShape& ds, const Box& box,
                        uint64_t seed, Stores stores = Stores::kCached) {
  const auto src = Pattern(ss.total_bytes(), seed);
  const auto before = Pattern(ds.total_bytes(), seed + 1);
  auto dst = before;
  auto program = CompileCopy(ss, ds, box);
  if (!program.ok()) return std::string(program.status().message());
  ExecuteProgram(*program, src.data(), dst.data(), stores);
  uint64_t expect = 0;
  for (const Field& f : ss.fields.fields()) expect += f.size * box.volume();
  if (program->bytes != expect) {
    return StrCat("program moves ", program->bytes, " bytes, expected ", expect);
  }
  return CheckCopy(ss, src, ds, dst, before, box);
}

}  // namespace

TEST_CASE("every layout pair of a generated family copies element-exactly") {
  // 1-4 dimensions, 1-8 fields of mixed sizes, blocking factors that do and
  // do not divide the extent, index spaces not starting at zero, sub-boxes.
  std::mt19937_64 rng(20261122);
  int cases = 0;
  for (int dims = 1; dims <= 4; ++dims) {
    const int64_t max_extent = dims <= 2 ? 17 : (dims == 3 ? 7 : 5);
    for (int i = 0; i < 600; ++i) {
      const Box bounds = RandomBounds(rng, dims, max_extent);
      const FieldSpace fields = RandomFields(rng);
      const InstanceShape ss{bounds, fields, RandomLayout(rng, bounds)};
      // The destination may have a larger index space than the box.
      Box dbounds = bounds;
      for (int d = 0; d < dims; ++d) dbounds.hi[d] += static_cast<int64_t>(rng() % 3);
      const InstanceShape ds{dbounds, fields, RandomLayout(rng, dbounds)};
      const Box box = (i % 2) ? bounds : RandomSubBox(rng, bounds);
      INFO("dims " << dims << " case " << i << ": " << ss.layout.ToString() << " over "
                   << ToString(bounds) << " -> " << ds.layout.ToString() << " over "
                   << ToString(dbounds) << ", box " << ToString(box));
      REQUIRE(RunAndCheck(ss, ds, box, static_cast<uint64_t>(i)) == "");
      ++cases;
    }
  }
  CHECK(cases == 2400);
}

TEST_CASE("named layout conversions copy element-exactly") {
  const FieldSpace fs = *FieldSpace::Make({{"a", 4}, {"b", 8}, {"c", 2}, {"d", 4}});
  const Box b2 = Box::FromExtents({37, 23});
  const std::vector<Layout> layouts = {Layout::Aos(2),
                                       Layout::Soa(2),
                                       Layout::RowMajor(2),
                                       Layout::ColumnMajor(2),
                                       *Layout::Hybrid(2, 8),
                                       *Layout::Hybrid(2, 5),
                                       *Layout::Blocked({4, 4}),
                                       *Layout::Blocked({5, 3}),
                                       *Layout::Parse("x,F,y", 2),
                                       *Layout::Parse("y_in=6,x,F,y_out", 2)};
  for (const Layout& a : layouts) {
    for (const Layout& b : layouts) {
      INFO(a.ToString() << " -> " << b.ToString());
      REQUIRE(RunAndCheck({b2, fs, a}, {b2, fs, b}, b2, 7) == "");
    }
  }
}

TEST_CASE("programs are canonical: contiguous copies are one memcpy") {
  const FieldSpace fs = *FieldSpace::Make({{"a", 4}, {"b", 8}, {"c", 4}});
  for (const Layout& l : {Layout::Aos(3), Layout::Soa(3), *Layout::Blocked({2, 3, 4})}) {
    const InstanceShape s{Box::FromExtents({8, 6, 12}), fs, l};
    auto p = CompileCopy(s, s, s.bounds);
    REQUIRE(p.ok());
    INFO(l.ToString());
    CHECK(p->ops.size() == 1);
    CHECK(p->ops[0].num_loops == 0);
    CHECK(p->ops[0].run_bytes == s.total_bytes());
  }
}

TEST_CASE("AOS to SOA is one strided op per field group, not one op per element") {
  const InstanceShape aos{Box::FromExtents({1 << 20}), FieldSpace::Uniform(8, 4), Layout::Aos(1)};
  const InstanceShape soa{aos.bounds, aos.fields, Layout::Soa(1)};
  auto p = CompileCopy(aos, soa, aos.bounds);
  REQUIRE(p.ok());
  CHECK(p->ops.size() <= 2);  // one tiled op (+ a remainder)
  CHECK(p->runs == 8u << 20);
  // A row of a 2-D row-major array is one run; a sub-box is one op.
  const InstanceShape rm{Box::FromExtents({64, 64}), FieldSpace::Uniform(1, 8),
                         Layout::RowMajor(2)};
  Box sub = Box::FromExtents({64, 64});
  sub.lo[0] = 8;
  sub.hi[0] = 16;
  sub.lo[1] = 4;
  sub.hi[1] = 36;
  auto q = CompileCopy(rm, rm, sub);
  REQUIRE(q.ok());
  REQUIRE(q->ops.size() == 1);
  CHECK(q->ops[0].run_bytes == uint64_t{32} * 8);
  CHECK(q->runs == 8);
}

TEST_CASE("incompatible copies are rejected with a message that names the problem") {
  const InstanceShape a{Box::FromExtents({10}), FieldSpace::Uniform(2, 4), Layout::Aos(1)};
  InstanceShape b = a;
  b.fields = FieldSpace::Uniform(3, 4);
  CHECK_THAT(std::string(CompileCopy(a, b, a.bounds).status().message()),
             Catch::Contains("field spaces differ"));
  Box big = Box::FromExtents({11});
  CHECK_THAT(std::string(CompileCopy(a, a, big).status().message()),
             Catch::Contains("outside the source"));
  InstanceShape c{Box::FromExtents({10, 2}), a.fields, Layout::Aos(2)};
  CHECK_THAT(std::string(CompileCopy(a, c, a.bounds).status().message()),
             Catch::Contains("dimension"));
}

TEST_CASE("an empty box compiles to an empty program") {
  const InstanceShape a{Box::FromExtents({10}), FieldSpace::Uniform(2, 4), Layout::Aos(1)};
  Box empty = a.bounds;
  empty.hi[0] = empty.lo[0];
  auto p = CompileCopy(a, a, empty);
  REQUIRE(p.ok());
  CHECK(p->ops.empty());
  CHECK(p->bytes == 0);
}

// Issue #11: index spaces at the edges of the accepted coordinates
// (+-(2^62-1)), blocked on both sides with blocks out of phase, compile
// and copy element-exactly; block boundaries are computed relative to lo,
// so nothing near int64's limits overflows (the UBSan build checks).
TEST_CASE("copies at the extreme accepted coordinates are element-exact") {
  const FieldSpace fs = FieldSpace::Make({{"a", 4}, {"b", 2}}).value();
  for (const int64_t base : {kMaxCoordinate - 64, -kMaxCoordinate}) {
    Box bounds;
    bounds.dims = 2;
    bounds.lo = {base, -kMaxCoordinate};
    bounds.hi = {base + 64, -kMaxCoordinate + 5};
    Box dbounds = bounds;
    dbounds.lo[0] = base + 1;  // the destination's blocks start elsewhere
    const InstanceShape ss{bounds, fs, Layout::Parse("x_in=7,F,x_out,y", 2).value()};
    const InstanceShape ds{dbounds, fs, Layout::Parse("F,y,x_in=5,x_out", 2).value()};
    Box box = dbounds;
    box.hi[0] -= 3;
    box.lo[1] += 1;
    INFO(ToString(box));
    CHECK(RunAndCheck(ss, ds, box, 7) == "");
  }
}

TEST_CASE("non-temporal stores copy exactly: odd sizes, misaligned ends, strided runs") {
  // Contiguous copies of sizes around the 64- and 128-byte loops and the
  // streaming threshold, at every destination misalignment within 32
  // bytes: through a program (the CPU's own choice of stores), and through
  // each of the two store loops directly (AVX2 where this CPU has it), so
  // the one a CPU without AVX2 takes is tested here too.
  using Run = void (*)(const std::byte*, std::byte*, uint64_t);
  std::vector<std::pair<const char*, Run>> loops = {{"program", nullptr},
                                                    {"sse2", &StreamStores::Sse2}};
  if (StreamStores::HaveAvx2()) loops.emplace_back("avx2", &StreamStores::Avx2);
  for (const auto& [name, run] : loops) {
    for (const uint64_t bytes :
         {uint64_t{1}, uint64_t{31}, uint64_t{127}, kStreamRunBytes - 1, kStreamRunBytes,
          uint64_t{383}, uint64_t{1000}, uint64_t{4096}, uint64_t{65536 + 13}}) {
      if (run == nullptr && bytes < kStreamRunBytes - 1) continue;  // a program would not stream
      for (uint64_t shift = 0; shift < 32; ++shift) {
        const auto src = Pattern(bytes + 32, bytes + shift);
        auto dst = Pattern(bytes + 64, 7);
        const auto before = dst;
        const std::byte* from = src.data() + (32 - shift);
        std::byte* to = dst.data() + shift;
        if (run != nullptr) {
          run(from, to, bytes);
          _mm_sfence();
        } else {
          CopyProgram p;
          CopyOp op;
          op.run_bytes = bytes;
          op.src_offset = 32 - shift;
          op.dst_offset = shift;
          p.ops.push_back(op);
          p.bytes = bytes;
          p.runs = 1;
          ExecuteProgram(p, src.data(), dst.data(), Stores::kStreaming);
        }
        INFO(name << ": bytes " << bytes << " shift " << shift);
        CHECK(std::equal(to, to + bytes, from));
        CHECK(std::equal(dst.begin(), dst.begin() + static_cast<ptrdiff_t>(shift), before.begin()));
        CHECK(std::equal(dst.begin() + static_cast<ptrdiff_t>(shift + bytes), dst.end(),
                         before.begin() + static_cast<ptrdiff_t>(shift + bytes)));
      }
    }
  }
  // Layout changes whose runs are long enough to stream (rows of a blocked
  // 2-D instance) and short ones (AOS <-> SOA), through the same reference.
  const FieldSpace fs = FieldSpace::Uniform(2, 4);
  const Box b = Box::FromExtents({96, 70});
  for (const char* a : {"F,x,y", "F,y,x", "x,F,y"}) {
    for (const char* d : {"F,x,y", "y,F,x", "x,y,F"}) {
      const InstanceShape ss{b, fs, *Layout::Parse(a, 2)};
      const InstanceShape ds{b, fs, *Layout::Parse(d, 2)};
      INFO(a << " -> " << d);
      CHECK(RunAndCheck(ss, ds, b, 3, Stores::kStreaming) == "");
    }
  }
}

TEST_CASE("strided runs of every fixed size copy exactly at any count and either stride sign") {
  // The executor moves runs of the sizes it knows at compile time (1-128
  // bytes) in loops of its own, those up to 16 bytes four to an
  // iteration: counts around that unrolling, forward and backward strides
  // (a reversed dimension), each run against a byte-by-byte reference,
  // nothing outside the runs touched.
  for (const uint64_t run : {1, 2, 3, 4, 8, 12, 16, 24, 32, 48, 64, 128}) {
    for (uint64_t count = 0; count <= 10; ++count) {
      for (const int sign : {1, -1}) {
        const uint64_t src_step = run + 3, dst_step = run + 1;
        const uint64_t span = (count + 1) * (src_step + dst_step) + 64;
        const auto src = Pattern(span, run * 100 + count);
        auto dst = Pattern(span, 5);
        auto want = dst;
        CopyOp op;
        op.run_bytes = run;
        op.num_loops = 1;
        op.loops[0].count = count;
        // Backward: start at the last run; the stride wraps as two's
        // complement, as the compilers store it.
        op.loops[0].src_stride = sign > 0 ? src_step : uint64_t{0} - src_step;
        op.loops[0].dst_stride = sign > 0 ? dst_step : uint64_t{0} - dst_step;
        op.src_offset = sign > 0 ? 0 : (count == 0 ? 0 : (count - 1) * src_step);
        op.dst_offset = sign > 0 ? 7 : 7 + (count == 0 ? 0 : (count - 1) * dst_step);
        for (uint64_t i = 0; i < count; ++i) {
          const uint64_t from = sign > 0 ? i * src_step : op.src_offset - i * src_step;
          const uint64_t to = sign > 0 ? 7 + i * dst_step : op.dst_offset - i * dst_step;
          std::copy_n(src.begin() + static_cast<ptrdiff_t>(from), run,
                      want.begin() + static_cast<ptrdiff_t>(to));
        }
        ExecuteOp(op, src.data(), dst.data());
        INFO("run " << run << " count " << count << " sign " << sign);
        CHECK(dst == want);
      }
    }
  }
}

}  // namespace ISOMETRY_TEST_FILE
