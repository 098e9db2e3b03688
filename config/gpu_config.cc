#include "config/gpu_config.h"

#include <algorithm>
#include <set>

#include "config/config_origin.h"
#include "config/config_parser.h"
#include "config/gpu_config_parser.h"
#include "config/runtime_config.h"
#include "core/strings.h"

namespace isometry {

Status GpuConfig::Validate() const {
  if (request_bytes < 4096) {
    return ConfigKeyError("gpu.request_size", "is ", request_bytes,
                          "; it must be at least 4096 bytes");
  }
  if (max_in_flight < 1 || max_in_flight > 64) {
    return ConfigKeyError("gpu.max_in_flight", "is ", max_in_flight, "; it must be from 1 to 64");
  }
  return OkStatus();
}

Status ReadGpu(const toml::node& node, std::string_view source, GpuConfig& out) {
  auto error = [source](const toml::node& n, std::string_view key, std::string_view problem) {
    return InvalidArgument(source, ":", n.source().begin.line, ": key '", key, "': ", problem);
  };
  const toml::table* t = node.as_table();
  if (!t) return error(node, "gpu", "must be a table ([gpu])");
  for (const auto& [k, v] : *t) {
    const std::string key = StrCat("gpu.", k.str());
    if (k.str() == "auto_memories") {
      const std::optional<bool> b = v.is_boolean() ? v.value<bool>() : std::nullopt;
      if (!b) return error(v, key, "must be true or false");
      out.auto_memories = *b;
    } else if (k.str() == "staging" || k.str() == "request_size") {
      uint64_t bytes = 0;
      if (v.is_integer() && *v.value<int64_t>() >= 0) {
        bytes = static_cast<uint64_t>(*v.value<int64_t>());
      } else if (const std::optional<std::string> s = v.value<std::string>(); s && v.is_string()) {
        Result<uint64_t> parsed = ParseByteSize(*s);
        if (!parsed.ok()) return error(v, key, std::string(parsed.status().message()));
        bytes = *parsed;
      } else {
        return error(v, key, "must be a size like 4096 or \"32MiB\"");
      }
      (k.str() == "staging" ? out.staging_bytes : out.request_bytes) = bytes;
    } else if (k.str() == "max_in_flight") {
      const std::optional<int64_t> n = v.is_integer() ? v.value<int64_t>() : std::nullopt;
      if (!n || *n < 1 || *n > 64) return error(v, key, "must be an integer from 1 to 64");
      out.max_in_flight = static_cast<int>(*n);
    } else {
      return error(v, key,
                   "unknown key (known here: auto_memories, staging, request_size, "
                   "max_in_flight)");
    }
  }
  return OkStatus();
}

}  // namespace isometry
