// Runs copy programs on host memory.
#pragma once

#include <cstddef>

#include "layout/copy_program.h"

namespace isometry {

// Executes one op between two host buffers (instance bases). The caller
// guarantees the program was compiled for shapes that fit these buffers.
// Thread-safe; ops of one program may run on different threads.
void ExecuteOp(const CopyOp& op, const std::byte* src, std::byte* dst);
void ExecuteProgram(const CopyProgram& program, const std::byte* src, std::byte* dst);

}  // namespace isometry
