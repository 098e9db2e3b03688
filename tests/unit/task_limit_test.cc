#include "daemon/server/task_limit.h"

#include <catch2/catch.hpp>
#include <string>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

TEST_CASE("PidsCgroupOf finds the pids controller's cgroup, v1 before v2") {
  const auto v1 = PidsCgroupOf("12:memory:/a\n8:pids:/system.slice/isometryd.service\n0::/x\n");
  REQUIRE(v1);
  CHECK(v1->first == "/system.slice/isometryd.service");
  CHECK(v1->second);
  const auto joined = PidsCgroupOf("3:cpu,pids,memory:/job\n");
  REQUIRE(joined);
  CHECK(joined->first == "/job");
  const auto v2 = PidsCgroupOf("0::/system.slice/isometryd.service\n");
  REQUIRE(v2);
  CHECK(v2->first == "/system.slice/isometryd.service");
  CHECK_FALSE(v2->second);
  // Not a pids controller, a name that merely contains it, nothing at all.
  CHECK_FALSE(PidsCgroupOf("4:name=pidsx:/a\n5:memory:/b"));
  CHECK_FALSE(PidsCgroupOf(""));
  CHECK_FALSE(PidsCgroupOf("garbage"));
}

TEST_CASE("ConnectionThreadsFitting keeps room for the rest of the daemon") {
  CHECK(ConnectionThreadsFitting(0) == 1);
  CHECK(ConnectionThreadsFitting(10) == 1);
  CHECK(ConnectionThreadsFitting(96) == 40);      // 16 kept back, half of 80
  CHECK(ConnectionThreadsFitting(570) == 249);    // 71 kept back
  CHECK(ConnectionThreadsFitting(4066) >= 1024);  // the unit's TasksMax fits the default
}

}  // namespace ISOMETRY_TEST_FILE
