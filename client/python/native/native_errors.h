// How isometry._native reports failures to Python: as the package's own
// isometry.errors.IsometryError, whose `code` is the gRPC code name
// ("INVALID_ARGUMENT", "NOT_FOUND", ...), so a caller catches one exception
// type whichever path, native or gRPC, a call took. absl's codes are gRPC's
// codes (same numbers, same names), so the name is absl's.
//
// Every function here needs the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <utility>

#include "core/status.h"

namespace isometry::python {

// Raises IsometryError(code, message), an instance of the code's subclass
// (isometry.errors: NotFound, Unavailable, ...; throws
// pybind11::error_already_set).
[[noreturn]] void ThrowError(const std::string& code, const std::string& message);

// Raises IsometryError for a failed status; returns on OK.
void ThrowIfError(const Status& status);

// The gRPC name of a status code, e.g. "DEADLINE_EXCEEDED".
std::string CodeName(absl::StatusCode code);

template <typename T>
T ValueOrThrow(Result<T>&& result) {
  ThrowIfError(result.status());
  return std::move(*result);
}

}  // namespace isometry::python
