// The [daemon] section of a private isometryd's config, for every launcher
// of one: DaemonProcess (benchmarks, C++ tests), and through the
// isometry_daemon_config tool the Python fixtures and shell scripts. One
// writer, so a new required key or a renamed one changes one place.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace isometry::tools {

struct DaemonConfigOptions {
  // Holds the daemon's sockets (local.sock, grpc.sock) and state (state/).
  std::string dir;
  std::string log_level = "warn";
  // Unset: the daemon's default.
  std::optional<int> shutdown_grace_ms = 2000;
  // Measure channels at start (off: tests need no figures and start faster).
  bool calibrate = false;
  // More [daemon] keys, each key = value with the value already in TOML
  // (quoted strings quoted), written in this order after the others.
  std::vector<std::pair<std::string, std::string>> extra;
};

// "[daemon]\n" and one "key = value\n" line per key; nothing after it, so a
// caller may append more [daemon] keys before its next table.
std::string DaemonSection(const DaemonConfigOptions& o);

// Options from the tool's command line (see daemon_config_main.cc):
//   --dir DIR [--log-level L] [--shutdown-grace-ms N|default] [--calibrate]
//   [--set KEY=TOML_VALUE]...
Result<DaemonConfigOptions> ParseDaemonConfigArgs(const std::vector<std::string>& args);

}  // namespace isometry::tools
