// Copy programs lowered to CUDA operations (channels/cuda/cuda_lowering.h),
// checked without a GPU: the operations, executed on the host the way the
// copy engines and the pack kernel would, give the bytes of layout's CPU
// executor, with and without the kernel allowed.
#include "channels/cuda/cuda_lowering.h"

#include <catch2/catch.hpp>

#include "layout/executor.h"
#include "unit/cuda_test_support.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::cuda;
using namespace isometry::testing;

namespace {

// "" or where the lowered copy and the CPU executor differ.
std::string Compare(const CopyProgram& program, uint64_t src_bytes, uint64_t dst_bytes,
                    const LoweringLimits& limits, uint64_t seed) {
  const auto src = Pattern(src_bytes, seed);
  auto want = Pattern(dst_bytes, seed + 1);
  auto got = want;
  ExecuteProgram(program, src.data(), want.data());
  const CudaLowering l = LowerProgram(program, limits);
  EmulateLowering(l, src.data(), got.data());
  if (!limits.kernel_allowed && !l.kernel_ops.empty()) return "kernel ops without the kernel";
  for (const CudaCopy& c : l.copies) {
    if (c.kind != CudaCopyKind::kMemcpy &&
        (c.src_pitch < c.width || c.dst_pitch < c.width || c.src_pitch > limits.max_pitch ||
         c.dst_pitch > limits.max_pitch)) {
      return "a pitch outside [width, max_pitch]";
    }
    if (c.kind == CudaCopyKind::kMemcpy3D && (c.src_rows < c.height || c.dst_rows < c.height)) {
      return "3-D slices that overlap";
    }
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] != got[i]) return StrCat("byte ", i, " differs");
  }
  return "";
}

CopyOp Op(uint64_t src, uint64_t dst, uint64_t run, std::vector<CopyLoop> loops) {
  CopyOp op{.src_offset = src, .dst_offset = dst, .run_bytes = run};
  op.num_loops = static_cast<int>(loops.size());
  std::copy(loops.begin(), loops.end(), op.loops.begin());
  return op;
}

CopyProgram Program(std::vector<CopyOp> ops) {
  CopyProgram p;
  for (const CopyOp& op : ops) {
    p.bytes += op.bytes();
    p.runs += op.runs();
  }
  p.ops = std::move(ops);
  return p;
}

}  // namespace

TEST_CASE("random layout pairs lower to operations that copy what the CPU executor copies") {
  std::mt19937_64 rng(20261124);
  int kernel = 0;
  int engines = 0;
  for (int dims = 1; dims <= 4; ++dims) {
    for (int i = 0; i < 300; ++i) {
      const RandomCopy c = MakeRandomCopy(rng, dims, i % 2 == 0);
      auto program = CompileCopy(c.src, c.dst, c.box);
      REQUIRE(program.ok());
      INFO("dims " << dims << " case " << i << ": " << c.src.layout.ToString() << " -> "
                   << c.dst.layout.ToString() << ", box " << ToString(c.box));
      for (bool allowed : {true, false}) {
        LoweringLimits limits{.kernel_allowed = allowed,
                              .max_2d_loop = i % 3 == 0 ? 1u : 64u,
                              .narrow_run_bytes = i % 4 == 1 ? 0u : 64u};
        REQUIRE(Compare(*program, c.src.total_bytes(), c.dst.total_bytes(), limits,
                        static_cast<uint64_t>(i)) == "");
      }
      const CudaLowering l = LowerProgram(*program);
      kernel += l.kernel_ops.empty() ? 0 : 1;
      engines += l.copies.empty() ? 0 : 1;
    }
  }
  // The family exercises both paths.
  CHECK(kernel > 0);
  CHECK(engines > 0);
}

TEST_CASE("each program shape takes the operation meant for it") {
  SECTION("a contiguous copy is one cudaMemcpy") {
    const CudaLowering l = LowerProgram(*ContiguousProgram(1000));
    REQUIRE(l.copies.size() == 1);
    CHECK(l.copies[0].kind == CudaCopyKind::kMemcpy);
    CHECK(l.copies[0].width == 1000);
    CHECK(l.kernel_ops.empty());
  }
  // The copy engines' shapes: runs of any width given to them
  // (narrow_run_bytes 0; the default sends runs under 64 bytes to the kernel).
  const LoweringLimits engines{.narrow_run_bytes = 0};
  SECTION("one strided loop is one 2-D copy") {
    const auto p = Program({Op(0, 0, 8, {{100, 32, 8}})});
    const CudaLowering l = LowerProgram(p, engines);
    REQUIRE(l.copies.size() == 1);
    CHECK(l.copies[0].kind == CudaCopyKind::kMemcpy2D);
    CHECK(l.copies[0].height == 100);
    CHECK(Compare(p, 3200, 800, engines, 1) == "");
  }
  SECTION("two loops with whole-pitch slices are one 3-D copy") {
    const auto p = Program({Op(0, 4, 8, {{5, 320, 64}, {4, 32, 16}})});
    const CudaLowering l = LowerProgram(p, engines);
    REQUIRE(l.copies.size() == 1);
    CHECK(l.copies[0].kind == CudaCopyKind::kMemcpy3D);
    CHECK(l.copies[0].src_rows == 10);
    CHECK(l.copies[0].dst_rows == 4);
    CHECK(Compare(p, 1600, 324, engines, 2) == "");
  }
  SECTION("two loops without whole-pitch slices are a loop of 2-D copies") {
    const auto p = Program({Op(0, 0, 8, {{3, 100, 24}, {3, 24, 8}})});
    const CudaLowering l = LowerProgram(p, engines);
    REQUIRE(l.copies.size() == 3);
    CHECK(l.copies[0].kind == CudaCopyKind::kMemcpy2D);
    CHECK(Compare(p, 300, 72, engines, 3) == "");
  }
  SECTION("loops walked backwards on both sides are turned around") {
    const auto back = static_cast<uint64_t>(-16);
    const auto p = Program({Op(240, 240, 4, {{16, back, back}})});
    const CudaLowering l = LowerProgram(p, engines);
    REQUIRE(l.copies.size() == 1);
    CHECK(l.copies[0].kind == CudaCopyKind::kMemcpy2D);
    CHECK(l.copies[0].src_offset == 0);
    CHECK(Compare(p, 256, 256, engines, 4) == "");
  }
  SECTION("three loops, or a stride backwards on one side, go to the pack kernel") {
    const auto back = static_cast<uint64_t>(-4);
    const auto p = Program({Op(0, 0, 2, {{2, 64, 2}, {3, 16, 12}, {2, 4, 72}}),
                            Op(1000, 300 + 28, 4, {{8, 8, back}})});
    const CudaLowering l = LowerProgram(p, engines);
    CHECK(l.copies.empty());
    REQUIRE(l.kernel_ops.size() == 2);
    CHECK(l.kernel_ops[1].first_run == 12);
    CHECK(l.kernel_runs == 20);
    CHECK(Compare(p, 1100, 400, engines, 5) == "");
    CHECK(Compare(p, 1100, 400, {.kernel_allowed = false}, 6) == "");
  }
  SECTION("narrow strided runs go to the kernel where it is allowed") {
    // An array of 8-byte structs of two 4-byte fields into two arrays.
    const auto p = Program({Op(0, 0, 4, {{2, 4, 400}, {100, 8, 4}})});
    const LoweringLimits narrow;  // the default: runs under 64 bytes
    const CudaLowering l = LowerProgram(p, narrow);
    CHECK(l.copies.empty());
    REQUIRE(l.kernel_ops.size() == 1);
    CHECK(l.kernel_runs == 200);
    CHECK(Compare(p, 800, 800, narrow, 8) == "");
    // Without the kernel the engines take them; contiguous copies stay theirs.
    CHECK(LowerProgram(p, {.kernel_allowed = false}).copies.size() == 2);
    CHECK(LowerProgram(*ContiguousProgram(8), narrow).copies.size() == 1);
  }
  SECTION("pitches beyond the engines' limit are not given to them") {
    const auto p = Program({Op(0, 0, 8, {{4, 64, 8}})});
    const CudaLowering l = LowerProgram(p, {.kernel_allowed = false, .max_pitch = 32});
    CHECK(l.copies.size() == 4);
    CHECK(Compare(p, 256, 32, {.kernel_allowed = false, .max_pitch = 32}, 7) == "");
  }
}

}  // namespace ISOMETRY_TEST_FILE
