// How a daemon benchmark that cannot go on ends: one line on stderr and
// exit status 1. The rows measured so far are void and no state needs an
// orderly shutdown.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/status.h"

namespace isometry::bench {

// The plan column of rows measured through the daemon.
inline constexpr char kNoDaemonPlan[] =
    "no plan: through the daemon, and the C++ client has no ExplainPlan";

[[noreturn]] inline void Die(const std::string& what) {
  std::fprintf(stderr, "isometry_bench: %s\n", what.c_str());
  std::exit(1);  // NOLINT(concurrency-mt-unsafe)
}

template <typename T>
T Must(Result<T> r, const char* what) {
  if (!r.ok()) {
    Die(std::string(what) + ": " + r.status().ToString());
  }
  return *std::move(r);
}

}  // namespace isometry::bench
