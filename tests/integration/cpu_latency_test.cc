// daemon.cpu_latency_us against a real isometryd: the kernel's PM QoS
// request is held while the daemon runs and gone when it stops or dies;
// a device it cannot open is an error naming the key.
#include "daemon/cpu_latency.h"

#include <signal.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "integration/daemon_fixture.h"
#include "unit/skip.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;

TEST_CASE("daemon.cpu_latency_us: the request is held while the daemon runs, gone when it dies",
          "[may_skip][cpu_latency]") {
  const auto before = CurrentCpuLatency();
  if (!before.ok()) ISOMETRY_SKIP("cannot read " << kCpuLatencyDevice << ": " << before.status());
  // A request below every other one shows as the node's; 3 us is one no
  // other process of this machine holds (a lower one hides ours).
  constexpr int32_t kAsked = 3;
  if (*before <= kAsked) ISOMETRY_SKIP("the node already holds a request of " << *before << " us");
  {
    Daemon d(std::string("cpu_latency_us = ") + std::to_string(kAsked) + "\n" + kOneMemory);
    CHECK(*CurrentCpuLatency() == kAsked);
    CHECK(d.Stop() == 0);
    CHECK(*CurrentCpuLatency() == *before);
  }
  // However it ends: the kernel drops a killed daemon's request with its
  // descriptor.
  Daemon d(std::string("cpu_latency_us = ") + std::to_string(kAsked) + "\n" + kOneMemory);
  CHECK(*CurrentCpuLatency() == kAsked);
  REQUIRE(::kill(d.pid(), SIGKILL) == 0);
  d.Stop();  // reaps it
  CHECK(*CurrentCpuLatency() == *before);
}

TEST_CASE(
    "daemon.cpu_latency_us: a device the daemon cannot write is a clear error naming the key") {
  char tmpl[] = "/tmp/isometry-cpulat-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  for (const std::string& device : {dir + "/missing", dir}) {  // absent; a directory
    auto held = HoldCpuLatency(0, device);
    REQUIRE_FALSE(held.ok());
    CHECK_THAT(std::string(held.status().message()),
               Catch::Contains("daemon.cpu_latency_us") && Catch::Contains(device));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace ISOMETRY_TEST_FILE
