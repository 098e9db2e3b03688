// A slice of a packed stream: the bytes [begin, end) of a canonical form's
// stream, as a form of their own, at the same offsets. The runtime cuts a
// datatype copy into chunks of the packed stream this way (chunk k of
// every hop is the same packed range on both sides), so each chunk
// compiles (CompileFormCopy) without expanding the rest of the form.
//
// The result describes exactly those bytes in pack order but is not
// canonical: a piece cut inside its loop nest becomes up to 2 x loops + 1
// pieces (a head, whole iterations, a tail), loops of count 1 included.
// Cost: O(pieces before `end` + loops x body size); nothing is expanded.
//
// Pure and thread-safe.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "layout/datatype_form.h"

namespace isometry {

// OutOfRange when begin > end or end > form.bytes().
Result<CanonicalForm> RestrictForm(const CanonicalForm& form, uint64_t begin, uint64_t end);

}  // namespace isometry
