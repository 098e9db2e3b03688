// The one writer of a private daemon's [daemon] section (DaemonProcess, the
// isometry_daemon_config tool for Python and shell launchers).
#include "tools/common/daemon_config.h"

#include <catch2/catch.hpp>

namespace isometry::tools {
namespace ISOMETRY_TEST_FILE {
namespace {

std::string FromArgs(const std::vector<std::string>& args) {
  auto o = ParseDaemonConfigArgs(args);
  REQUIRE(o.ok());
  return DaemonSection(*o);
}

TEST_CASE("the section DaemonProcess writes: private paths, warn, 2 s grace, no calibration") {
  // Byte for byte what DaemonProcess wrote before there was one writer.
  CHECK(DaemonSection({.dir = "/tmp/d"}) ==
        "[daemon]\n"
        "local_socket = \"/tmp/d/local.sock\"\n"
        "grpc_socket = \"/tmp/d/grpc.sock\"\n"
        "state_dir = \"/tmp/d/state\"\n"
        "log_level = \"warn\"\n"
        "shutdown_grace_ms = 2000\n"
        "calibrate = false\n");
  CHECK(FromArgs({"--dir", "/tmp/d"}) == DaemonSection({.dir = "/tmp/d"}));
}

TEST_CASE("the tool's options give the same section as the struct") {
  const DaemonConfigOptions o{.dir = "/x",
                              .log_level = "info",
                              .shutdown_grace_ms = 500,
                              .calibrate = true,
                              .extra = {{"socket_mode", "\"0666\""}, {"max_sessions", "64"}}};
  CHECK(FromArgs({"--dir", "/x", "--log-level", "info", "--shutdown-grace-ms", "500", "--calibrate",
                  "--set", "socket_mode=\"0666\"", "--set", "max_sessions=64"}) ==
        DaemonSection(o));
  const std::string s = DaemonSection(o);
  CHECK(s.find("calibrate = true\n") != std::string::npos);
  // Extra keys come last, in order, so a caller's own lines may follow.
  CHECK(s.ends_with("socket_mode = \"0666\"\nmax_sessions = 64\n"));
}

TEST_CASE("'default' leaves the shutdown grace to the daemon") {
  const std::string s = FromArgs({"--dir", "/x", "--shutdown-grace-ms", "default"});
  CHECK(s.find("shutdown_grace_ms") == std::string::npos);
  CHECK(s.find("calibrate = false\n") != std::string::npos);
}

TEST_CASE("bad tool arguments are refused with the reason") {
  auto message = [](const std::vector<std::string>& args) {
    auto o = ParseDaemonConfigArgs(args);
    REQUIRE_FALSE(o.ok());
    CHECK(o.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(o.status().message());
  };
  CHECK(message({}) == "--dir is required");
  CHECK(message({"--dir"}) == "--dir needs a value");
  CHECK(message({"--dir", "/x", "--shutdown-grace-ms", "1s"}) ==
        "--shutdown-grace-ms: '1s' is not a number");
  CHECK(message({"--dir", "/x", "--set", "novalue"}) == "--set: 'novalue' is not KEY=VALUE");
  CHECK(message({"--dir", "/x", "--set", "=1"}) == "--set: '=1' is not KEY=VALUE");
  CHECK(message({"--dir", "/x", "--verbose"}) == "unknown option --verbose");
}

}  // namespace
}  // namespace ISOMETRY_TEST_FILE
}  // namespace isometry::tools
