// How far a copy program reaches past its base on one side: what a
// network hop's chunk buffer must hold.
#pragma once

#include <cstdint>

#include "layout/copy_program.h"

namespace isometry {

// One past the furthest byte `p` touches from its base on one side
// (`dst`: the destination's), for programs whose strides are
// non-negative; 0 for an empty program.
uint64_t ProgramSpan(const CopyProgram& p, bool dst);

}  // namespace isometry
