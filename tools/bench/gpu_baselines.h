// What a user would write by hand on a GPU, as gpu_bench's baselines: an
// array-of-structs to struct-of-arrays transpose kernel. Compiled by nvcc
// (gpu_baselines.cu); only gpu_bench links it.
#pragma once

#include <cstdint>

namespace isometry::bench {

// Launches the transpose of `elements` structs of `fields` 4-byte fields
// (AOS at `src`, both device pointers) into `fields` arrays of `elements`
// values each (SOA at `dst`) on the default stream and waits for it.
// Returns the CUDA error code (0: success).
int TransposeAosToSoa4(const void* src, void* dst, uint64_t elements, int fields);

}  // namespace isometry::bench
