// Starts a helper process whose stdin and stdout are pipes to this one: the
// way tests and benchmarks drive a second client process (a private range
// owner) line by line.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "core/status.h"

namespace isometry::tools {

struct PipedChild {
  pid_t pid = -1;
  int to = -1;    // its stdin (write end); closing it is end of input
  int from = -1;  // its stdout (read end)
};

// posix_spawn of argv[0] (a path) with `argv`, this process's environment
// and stderr; posix_spawn rather than fork because the caller may have
// threads. Errors: INTERNAL for pipe(), UNAVAILABLE when it cannot start.
Result<PipedChild> SpawnPiped(const std::vector<std::string>& argv);

}  // namespace isometry::tools
