// Randomness from the kernel for names and credentials nobody may predict,
// and the comparison of such credentials.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace isometry {

// `bytes` random bytes from getrandom(2), hex-encoded (2 x bytes characters).
// Retries until the kernel has answered in full; never returns fewer.
std::string RandomHex(size_t bytes);

// Compares two credentials (tokens, MACs) without an early exit: how long a
// wrong one takes to refuse says nothing about how much of it was right.
bool SameSecret(std::string_view a, std::string_view b);

}  // namespace isometry
