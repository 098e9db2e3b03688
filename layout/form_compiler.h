// Compiles a copy between two canonical forms (layout/datatype_form.h) into
// the engine's CopyProgram: the i-th byte of the source's packed stream goes
// to the i-th byte of the destination's. One engine for every description:
// datatype <-> datatype, datatype <-> layout, and layout <-> layout (the last
// through CompileCopy, unchanged).
//
// The program is a pure function of the two forms, so a cache may key it by
// (FormHash(src), FormHash(dst)) and compare the forms on a hit.
//
// Shape of the result:
//  - a single piece on each side whose loop nests refine each other (one
//    side's counts split the other's, as vector(n, 8, 16) against
//    contiguous, or vectors with blocks 8 and 16) is one op, no expansion;
//  - otherwise the two streams are walked run by run (at most
//    kMaxFormCopyRuns paired runs) and recompressed: a block of up to
//    8 consecutive ops that repeats at a constant step becomes
//    those ops with an outer loop, level after level; vectors with blocks of
//    12 and 8 bytes become a handful of ops;
//  - at most kMaxFormCopyOps ops; past it, or past the walk bound,
//    ResourceExhausted: the daemon refuses the copy or packs/unpacks.
// Ops run in pack order except that repeated blocks are looped per op: a
// destination whose runs overlap (which MPI forbids for receives) may end
// with a different byte winning than MPI_Unpack would leave.
//
// Thread-safe (pure functions).
#pragma once

#include <cstdint>

#include "core/box.h"
#include "core/datatype.h"
#include "core/instance.h"
#include "core/status.h"
#include "layout/copy_program.h"
#include "layout/datatype_form.h"

namespace isometry {

inline constexpr size_t kMaxFormCopyOps = size_t{1} << 16;
inline constexpr int64_t kMaxFormCopyRuns = int64_t{1} << 22;

// CopyProgram offsets are unsigned, a datatype's may be negative: every
// program offset is relative to the side's origin plus its shift, which is
// the form's lowest offset (for a datatype, the true lb of the first
// element, or of the last for a negative extent; for a layout, >= 0). The
// caller runs the program with src = src_origin + src_shift and
// dst = dst_origin + dst_shift.
struct FormCopy {
  CopyProgram program;
  int64_t src_shift = 0;
  int64_t dst_shift = 0;
};

// InvalidArgument naming both sizes when the streams differ in bytes.
Result<FormCopy> CompileFormCopy(const CanonicalForm& src, const CanonicalForm& dst);

// Entry points for the daemon. A layout side is its box in AOS C order (see
// LayoutForm); its origin is the instance's first byte.
Result<FormCopy> CompileDatatypeCopy(const Datatype& src, int64_t src_count, const Datatype& dst,
                                     int64_t dst_count);
Result<FormCopy> CompileDatatypeToLayout(const Datatype& src, int64_t src_count,
                                         const InstanceShape& dst, const Box& dst_box);
Result<FormCopy> CompileLayoutToDatatype(const InstanceShape& src, const Box& src_box,
                                         const Datatype& dst, int64_t dst_count);
// Exactly CompileCopy (both shifts 0): a layout <-> layout copy keeps the
// layout compiler's program (field loops, tiling, destination order).
Result<FormCopy> CompileLayoutCopy(const InstanceShape& src, const InstanceShape& dst,
                                   const Box& box);

// Runs of each side and of the program, for the planner's CMA-vs-pack cost.
struct FormCopyCounts {
  uint64_t bytes = 0;
  uint64_t src_runs = 0;
  uint64_t dst_runs = 0;
  uint64_t program_runs = 0;  // memcpy calls of the program (>= both sides)
};
FormCopyCounts CountsOf(const CanonicalForm& src, const CanonicalForm& dst,
                        const CopyProgram& program);

}  // namespace isometry
