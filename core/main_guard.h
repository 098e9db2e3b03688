// One main() wrapper for our programs: an exception that escapes the
// program's own main (a bug, or an allocation failure; our errors are
// Status values) is reported in one line with the program's name instead of
// std::terminate's abort, and the process exits with `failure_code`.
#pragma once

#include <cstdio>
#include <exception>

namespace isometry {

template <typename Main>
int RunMain(const char* program, int failure_code, Main&& main, int argc, char** argv) {
  try {
    return main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: fatal: %s\n", program, e.what());
  } catch (...) {
    std::fprintf(stderr, "%s: fatal: unknown exception\n", program);
  }
  return failure_code;
}

}  // namespace isometry
