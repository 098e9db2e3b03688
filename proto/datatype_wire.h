// Datatypes on the wire: isometry.v1.Datatype (a message tree named after
// the MPI constructors) to and from core/datatype.h. Used by the daemon's
// services and by the C++ client.
//
// A message arrives from a client or a peer: every field is validated by
// the core constructors (counts, lengths, bounds, overflow), and the tree
// is walked with an explicit depth bound before any recursion, so no
// message can exhaust the stack or allocate without bound.
#pragma once

#include <cstdint>
#include <functional>

#include "core/datatype.h"
#include "core/status.h"
#include "isometry.pb.h"

namespace isometry::wire {

// Resolves `registered` handles (RegisterDatatype) of the caller's
// session; empty: handles are refused.
using RegisteredDatatypes = std::function<Result<Datatype>(uint64_t handle)>;

// The datatype a message describes. Errors (INVALID_ARGUMENT) name the path
// to the offending node, e.g. "datatype.vector.old: count -1 < 0".
Result<Datatype> DatatypeFromProto(const v1::Datatype& msg,
                                   const RegisteredDatatypes& registered = {});

// The message of a datatype, as the client sends it. Subarray and darray
// are sent with their arguments as given; everything else too, so the
// daemon rebuilds the same tree.
void DatatypeToProto(const Datatype& type, v1::Datatype* out);

}  // namespace isometry::wire
