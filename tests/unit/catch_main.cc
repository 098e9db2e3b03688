// Catch2's main, except that a run in which a case skipped (ISOMETRY_SKIP,
// unit/skip.h) and none failed exits 77, which ctest reports as "Skipped".
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "unit/skip.h"

int main(int argc, char* argv[]) {
  const int failed = Catch::Session().run(argc, argv);
  const int skipped = isometry::testing::SkippedCases();
  if (failed == 0 && skipped > 0) {
    std::fprintf(stderr, "%d test case(s) skipped: exit %d\n", skipped,
                 isometry::testing::kSkipExitCode);
    return isometry::testing::kSkipExitCode;
  }
  return failed;
}
