// isometry_daemon_config: prints the [daemon] section of a private
// isometryd's config (tools/common/daemon_config.h), so the Python fixtures
// and shell launchers write it exactly as DaemonProcess does.
//
//   isometry_daemon_config --dir DIR [--log-level L]
//       [--shutdown-grace-ms N|default] [--calibrate] [--set KEY=TOML_VALUE]...
#include <cstdio>
#include <string>
#include <vector>

#include "tools/common/daemon_config.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const auto options = isometry::tools::ParseDaemonConfigArgs(args);
  if (!options.ok()) {
    std::fprintf(stderr, "isometry_daemon_config: %s\n",
                 std::string(options.status().message()).c_str());
    return 2;
  }
  std::fputs(isometry::tools::DaemonSection(*options).c_str(), stdout);
  return 0;
}
