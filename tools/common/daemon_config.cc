#include "tools/common/daemon_config.h"

#include <charconv>

namespace isometry::tools {

std::string DaemonSection(const DaemonConfigOptions& o) {
  std::string out = "[daemon]\n";
  StrAppend(&out, "local_socket = \"", o.dir, "/local.sock\"\n");
  StrAppend(&out, "grpc_socket = \"", o.dir, "/grpc.sock\"\n");
  StrAppend(&out, "state_dir = \"", o.dir, "/state\"\n");
  StrAppend(&out, "log_level = \"", o.log_level, "\"\n");
  if (o.shutdown_grace_ms) StrAppend(&out, "shutdown_grace_ms = ", *o.shutdown_grace_ms, "\n");
  StrAppend(&out, "calibrate = ", o.calibrate ? "true" : "false", "\n");
  for (const auto& [key, value] : o.extra) StrAppend(&out, key, " = ", value, "\n");
  return out;
}

Result<DaemonConfigOptions> ParseDaemonConfigArgs(const std::vector<std::string>& args) {
  DaemonConfigOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--calibrate") {
      o.calibrate = true;
      continue;
    }
    if (a != "--dir" && a != "--log-level" && a != "--shutdown-grace-ms" && a != "--set") {
      return InvalidArgument("unknown option ", a);
    }
    if (i + 1 >= args.size()) return InvalidArgument(a, " needs a value");
    const std::string& v = args[++i];
    if (a == "--dir") {
      o.dir = v;
    } else if (a == "--log-level") {
      o.log_level = v;
    } else if (a == "--shutdown-grace-ms") {
      if (v == "default") {
        o.shutdown_grace_ms.reset();
        continue;
      }
      int ms = 0;
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), ms);
      if (ec != std::errc() || end != v.data() + v.size()) {
        return InvalidArgument("--shutdown-grace-ms: '", v, "' is not a number");
      }
      o.shutdown_grace_ms = ms;
    } else {  // --set
      const size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0) {
        return InvalidArgument("--set: '", v, "' is not KEY=VALUE");
      }
      o.extra.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    }
  }
  if (o.dir.empty()) return InvalidArgument("--dir is required");
  return o;
}

}  // namespace isometry::tools
