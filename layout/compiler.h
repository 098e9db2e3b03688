// The layout engine's compiler: (source shape, destination shape, box) to a
// canonical CopyProgram of maximal contiguous runs.
#pragma once

#include "core/box.h"
#include "core/instance.h"
#include "core/status.h"
#include "layout/copy_program.h"

namespace isometry {

// Compiles a copy of every field of `box` from `src` to `dst`. Both shapes
// must have the same field space and contain `box`. Offsets in the result
// are relative to each instance's first byte. Thread-safe (pure function).
//
// Errors name the problem: mismatched field spaces or dimensionality, a box
// outside either instance, invalid shapes.
Result<CopyProgram> CompileCopy(const InstanceShape& src, const InstanceShape& dst, const Box& box);

}  // namespace isometry
