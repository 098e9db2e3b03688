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

// One run of non-temporal stores, as kStreaming copies each run: with AVX2
// where the CPU has it (HaveAvx2), else SSE2. Exposed so that tests run
// both on any machine; the caller fences (_mm_sfence).
struct StreamStores {
  static bool HaveAvx2();
  static void Sse2(const std::byte* src, std::byte* dst, uint64_t bytes);
  static void Avx2(const std::byte* src, std::byte* dst, uint64_t bytes);  // needs HaveAvx2()
};

}  // namespace isometry
