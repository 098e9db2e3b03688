// The cluster's shared secret and what is made with it: HMAC-SHA256 proofs
// for the peer hello and random tokens. The secret itself never travels.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/random.h"  // RandomHex for nonces and tokens, SameSecret for MACs
#include "core/status.h"

namespace isometry {

// Reads the secret (trailing newlines dropped). At least 16 bytes; a file
// others may read is accepted with a warning in the log.
Result<std::string> LoadSecret(const std::string& path);
// HMAC-SHA256 over the parts, each followed by a 0x1f separator. Compare
// MACs with SameSecret (core/random.h).
std::string Hmac(std::string_view secret, const std::vector<std::string>& parts);

}  // namespace isometry
