// Datatypes written as text: what Datatype::ToString prints, and a shorter
// positional form for people typing a type on a command line (`isoctl plan
// --src-type`). Both forms may be mixed in one text.
//
// Grammar (whitespace is allowed between any two tokens; "," and ";" are
// interchangeable separators; a number may end in "B" to say bytes):
//   type     := basic | ctor
//   basic    := byte | char | int8 | int16 | int32 | int64 | uint8 | uint16
//             | uint32 | uint64 | float | double | long_double
//   contiguous(N, T)
//   vector(N, B, S, T)             S in elements of T, or bytes with "B"
//   hvector(N, B, S, T)            S in bytes ("B" optional)
//   indexed([b,...], [d,...], T)   d in elements, or bytes with "B"
//   indexed([b@dB,...]; T)         ToString's form: length@displacement
//   hindexed(...)                  the same, displacements in bytes
//   indexed_block(B, [d,...], T)   hindexed_block(B, [d,...], T)
//   struct([b,...], [d,...], [T,...])   or   struct([b*T@dB,...])
//   subarray([sizes], [subsizes], [starts], c|fortran, T)
//   subarray(C|F, sizes=[...], subsizes=[...], starts=[...]; T)
//   darray(NPROCS, RANK, [gsizes], [distribs], [psizes], c|fortran, T)
//   darray(rank R/NPROCS, C|F, gsizes=[...], distribs=[...], psizes=[...]; T)
//                                  a distrib is none, block, block(D),
//                                  cyclic or cyclic(D) (D the darg)
//   resized(LB, EXTENT, T)
//
// Round trip: for every datatype t whose ToString(SIZE_MAX) has no
// abbreviated list ("+N more", lists longer than 8 entries),
// SameType(ParseDatatype(t.ToString(SIZE_MAX)), t) holds (the dargs of a
// "none" distribution, which MPI ignores, come back as the default).
//
// Bounds, for text from untrusted users: at most kMaxDatatypeTextBytes of
// input and kMaxDatatypeDepth levels of nesting (checked before recursing);
// every number must fit int64. The constructors validate the arguments
// (core/datatype.h). Every error is InvalidArgument and names the column
// (1-based) and what was expected, e.g.
//   "datatype text, column 9: expected ',' or ';', got 'x'".
#pragma once

#include <cstddef>
#include <string_view>

#include "core/datatype.h"
#include "core/status.h"

namespace isometry {

inline constexpr size_t kMaxDatatypeTextBytes = size_t{1} << 20;

Result<Datatype> ParseDatatype(std::string_view text);

}  // namespace isometry
