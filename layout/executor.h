// Runs copy programs on host memory.
#pragma once

#include <cstddef>

#include "layout/copy_program.h"

namespace isometry {

// How a copy writes its destination. kStreaming: runs of kStreamRunBytes
// or more bypass the cache (non-temporal stores), which saves the read
// for ownership of every destination line and leaves the cache to others:
// faster for a destination larger than the last-level cache that nobody
// reads soon, slower for one read right after (a pipeline's next hop).
enum class Stores { kCached, kStreaming };
inline constexpr uint64_t kStreamRunBytes = 256;

// Executes one op between two host buffers (instance bases). The caller
// guarantees the program was compiled for shapes that fit these buffers.
// Thread-safe; ops of one program may run on different threads.
void ExecuteOp(const CopyOp& op, const std::byte* src, std::byte* dst,
               Stores stores = Stores::kCached);
void ExecuteProgram(const CopyProgram& program, const std::byte* src, std::byte* dst,
                    Stores stores = Stores::kCached);

}  // namespace isometry
