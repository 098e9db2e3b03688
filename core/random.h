// Randomness from the kernel for names and credentials nobody may predict.
#pragma once

#include <cstddef>
#include <string>

namespace isometry {

// `bytes` random bytes from getrandom(2), hex-encoded (2 x bytes characters).
// Retries until the kernel has answered in full; never returns fewer.
std::string RandomHex(size_t bytes);

}  // namespace isometry
