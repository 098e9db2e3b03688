// Helpers of the runtime's unit tests (runtime_test.cc,
// runtime_express_test.cc).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "daemon/runtime/runtime.h"
#include "unit/test_util.h"

namespace isometry::testing {

// An instance with its own storage, filled with a pattern.
struct Buf {
  InstanceShape shape;
  std::vector<std::byte> bytes;
  std::vector<std::byte> before;
  Buf(InstanceShape s, uint64_t seed) : shape(std::move(s)) {
    bytes = Pattern(shape.total_bytes(), seed);
    before = bytes;
  }
  InstanceRef Ref(MemoryId m) { return {m, bytes.data(), bytes.size(), shape}; }
};

inline MemoryId Mem(Runtime& rt, const char* name) { return *rt.FindMemory(name); }

}  // namespace isometry::testing
