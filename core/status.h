// The one error type of the whole tree: absl::Status and absl::StatusOr.
//
// Every fallible call returns a Status or a Result<T>. Messages name the
// offending object and value ("layout 'F,x,F': field space F appears twice"),
// so they can be shown to a user unchanged. Conversion to grpc::Status happens
// only at the service boundary.
#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include <sstream>
#include <string>

namespace isometry {

using Status = absl::Status;
template <typename T>
using Result = absl::StatusOr<T>;

inline Status OkStatus() { return absl::OkStatus(); }

// Concatenates anything with an operator<< (Debian's abseil is built with
// its own string_view, so absl::StrCat does not take std::string_view).
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
template <typename... Args>
void StrAppend(std::string* s, const Args&... args) {
  s->append(StrCat(args...));
}

template <typename... Args>
Status InvalidArgument(const Args&... args) {
  return absl::InvalidArgumentError(StrCat(args...));
}
template <typename... Args>
Status OutOfRange(const Args&... args) {
  return absl::OutOfRangeError(StrCat(args...));
}
template <typename... Args>
Status ResourceExhausted(const Args&... args) {
  return absl::ResourceExhaustedError(StrCat(args...));
}
template <typename... Args>
Status NotFound(const Args&... args) {
  return absl::NotFoundError(StrCat(args...));
}
template <typename... Args>
Status Internal(const Args&... args) {
  return absl::InternalError(StrCat(args...));
}
template <typename... Args>
Status Unavailable(const Args&... args) {
  return absl::UnavailableError(StrCat(args...));
}
template <typename... Args>
Status FailedPrecondition(const Args&... args) {
  return absl::FailedPreconditionError(StrCat(args...));
}
template <typename... Args>
Status PermissionDenied(const Args&... args) {
  return absl::PermissionDeniedError(StrCat(args...));
}
template <typename... Args>
Status Unimplemented(const Args&... args) {
  return absl::UnimplementedError(StrCat(args...));
}

}  // namespace isometry

// Returns early with the error of an expression that yields a Status.
#define ISO_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::isometry::Status iso_status_ = (expr);   \
    if (!iso_status_.ok()) return iso_status_; \
  } while (0)

#define ISO_CONCAT_INNER_(a, b) a##b
#define ISO_CONCAT_(a, b) ISO_CONCAT_INNER_(a, b)
// Declares `lhs` from a Result<T> expression, or returns its error.
#define ISO_ASSIGN_OR_RETURN(lhs, expr) \
  ISO_ASSIGN_OR_RETURN_IMPL_(ISO_CONCAT_(iso_result_, __LINE__), lhs, expr)
// `lhs` may be a declaration ("const T x") and `tmp` is an identifier:
// neither may be parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define ISO_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)
