// isoctl's exit codes, the contract scripts rely on, and how an error
// Status carries the one it maps to.
//
//   0  success
//   1  the daemon answered with an error (or the transfer waited for failed)
//   2  usage error: bad options, found before the daemon is asked
//   3  the daemon cannot be reached on its socket
//   4  `health`: degraded (a warning: a peer connecting, a pool 90% full,
//      a channel with requests out and no bytes moving)
//   5  `health`: unhealthy (a peer down or refused, a pool 98% full)
#pragma once

#include <string>

#include "core/status.h"

namespace isometry::isoctl {

enum ExitCode : int {
  kExitOk = 0,
  kExitDaemonError = 1,
  kExitUsage = 2,
  kExitUnreachable = 3,
  kExitDegraded = 4,
  kExitUnhealthy = 5,
};

// An error found in the command line (exit 2). `message` is shown as is.
Status UsageError(const std::string& message);
// The daemon could not be reached (exit 3); `message` names the socket.
Status UnreachableError(const std::string& message);

// `health`'s verdict when it is not healthy (exit 4 or 5).
Status HealthError(const std::string& message, ExitCode exit);

// kExitOk for OK, the code an error was marked with, else kExitDaemonError.
ExitCode ExitCodeOf(const Status& status);

// "NOT_FOUND: no transfer 7" for daemon errors; the bare message for usage
// and reachability errors (their message already says what went wrong).
std::string Describe(const Status& status);

}  // namespace isometry::isoctl
