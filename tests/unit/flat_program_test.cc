// Flattened copy programs (layout/flat_program.h) copy exactly what the
// program copies, whether an op is spread into runs or kept whole.
#include "layout/flat_program.h"

#include <catch2/catch.hpp>
#include <random>
#include <vector>

#include "layout/executor.h"
#include "unit/copy_ops.h"
#include "unit/random_program.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using isometry::testing::Pattern;
using isometry::testing::RandomProgram;
using isometry::testing::Strided;

namespace {

// `p` run by the executor and flattened, into destinations that start
// alike: both must end alike.
void SameAsExecutor(const CopyProgram& p, uint64_t src_bytes, uint64_t dst_bytes, uint32_t seed) {
  const std::vector<std::byte> src = Pattern(src_bytes, seed);
  std::vector<std::byte> want = Pattern(dst_bytes, seed + 1), got = want;
  ExecuteProgram(p, src.data(), want.data());
  const FlatProgram flat(p);
  CHECK(flat.bytes() == p.bytes);
  CHECK(flat.runs() == p.runs);
  flat.Execute(src.data(), got.data());
  CHECK(got == want);
}

}  // namespace

TEST_CASE("scattered points of every fixed size copy as the executor does") {
  // Pairs of runs sharing a stride (how compilers leave scattered points)
  // and single runs, of each size the flat form moves as a fixed size and
  // of sizes it does not.
  for (uint64_t run : {1, 3, 4, 8, 12, 16, 24, 32, 48, 64, 100}) {
    CopyProgram p;
    uint64_t src = 0, dst = 0;
    for (int i = 0; i < 20; ++i) {
      const uint64_t gap = run * static_cast<uint64_t>(3 + i % 5);
      if (i % 3 == 0) {
        p.ops.push_back(Strided(src, dst, run, {}));
        src += gap;
        dst += run;
      } else {
        p.ops.push_back(Strided(src, dst, run, {{2, gap, run}}));
        src += 2 * gap;
        dst += 2 * run;
      }
    }
    TallyProgram(p);
    SameAsExecutor(p, src, dst, static_cast<uint32_t>(run));
  }
}

TEST_CASE("ops of many runs stay whole and still copy as the executor does") {
  CopyProgram p;
  p.ops.push_back(Strided(0, 0, 8, {{1000, 16, 8}}));                             // 1000 runs
  p.ops.push_back(Strided(16000, 8000, 24, {{3, 48, 24}}));                       // 3 runs: spread
  p.ops.push_back(Strided(16200, 8072, 4, {{9, 40, 36}, {9, 4, 4}}));             // 81 runs
  p.ops.push_back(Strided(20000, 8400, 4, {{4, static_cast<uint64_t>(-8), 4}}));  // backwards
  TallyProgram(p);
  SameAsExecutor(p, 20004, 8416, 7);
}

TEST_CASE("random programs copy as the executor does") {
  std::mt19937_64 rng(20261206);
  for (int i = 0; i < 300; ++i) {
    uint64_t src_bytes = 0, dst_bytes = 0;
    const CopyProgram p = RandomProgram(rng, &src_bytes, &dst_bytes);
    SameAsExecutor(p, src_bytes, dst_bytes, static_cast<uint32_t>(i));
  }
}

TEST_CASE("an empty program copies nothing") {
  const FlatProgram flat{CopyProgram{}};
  CHECK(flat.bytes() == 0);
  CHECK(flat.runs() == 0);
  std::byte b{1};
  flat.Execute(&b, &b);
  CHECK(b == std::byte{1});
}

}  // namespace ISOMETRY_TEST_FILE
