#include "tools/isoctl/exit_codes.h"

#include <absl/strings/cord.h>

namespace isometry::isoctl {

namespace {

// The exit code rides on the Status as a payload, so errors stay plain
// absl::Status values all the way to main().
constexpr char kExitPayload[] = "type.isometry.dev/isoctl.ExitCode";

Status Marked(absl::StatusCode code, const std::string& message, ExitCode exit) {
  Status s(code, message);
  s.SetPayload(kExitPayload, absl::Cord(std::to_string(static_cast<int>(exit))));
  return s;
}

}  // namespace

Status UsageError(const std::string& message) {
  return Marked(absl::StatusCode::kInvalidArgument, message, kExitUsage);
}

Status UnreachableError(const std::string& message) {
  return Marked(absl::StatusCode::kUnavailable, message, kExitUnreachable);
}

Status HealthError(const std::string& message, ExitCode exit) {
  return Marked(absl::StatusCode::kFailedPrecondition, message, exit);
}

ExitCode ExitCodeOf(const Status& status) {
  if (status.ok()) {
    return kExitOk;
  }
  const auto payload = status.GetPayload(kExitPayload);
  if (!payload) {
    return kExitDaemonError;
  }
  const std::string text(*payload);
  if (text == "2") {
    return kExitUsage;
  }
  if (text == "3") {
    return kExitUnreachable;
  }
  if (text == "4") {
    return kExitDegraded;
  }
  if (text == "5") {
    return kExitUnhealthy;
  }
  return kExitDaemonError;
}

std::string Describe(const Status& status) {
  std::string message(status.message());
  if (ExitCodeOf(status) != kExitDaemonError) {
    return message;
  }
  return absl::StatusCodeToString(status.code()) + ": " + message;
}

}  // namespace isometry::isoctl
