// A Catch2 case that cannot run on this machine (no root, no tmpfs mount, no
// device) says why and returns, and the binary then exits 77, ctest's
// SKIP_RETURN_CODE, instead of reporting a pass it did not earn. Tag such a
// case [may_skip][NAME]: tests/ctest_helpers.cmake gives it the ctest entry
// BINARY.NAME of its own, so the binary's other cases still report "Passed".
#pragma once

#include <catch2/catch.hpp>

namespace isometry::testing {

inline constexpr int kSkipExitCode = 77;

// How many cases of this run skipped; read by catch_main.cc.
inline int& SkippedCases() {
  static int n = 0;
  return n;
}

}  // namespace isometry::testing

// Ends the current test case as skipped, saying why (a stream expression,
// as for WARN).
#define ISOMETRY_SKIP(why)                                                                  \
  do {                                                                                      \
    ++::isometry::testing::SkippedCases();                                                  \
    WARN("skipped: " << why); /* NOLINT(bugprone-macro-parentheses): a stream expression */ \
    return;                                                                                 \
  } while (false)
