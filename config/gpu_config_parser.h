// Internal to config/: [gpu] of the config file (config_parser.cc reads
// the other tables and calls this).
#pragma once

#include <toml++/toml.h>

#include <string_view>

#include "config/gpu_config.h"
#include "core/status.h"

namespace isometry {

// Reads the table at `node` (gpu) into `out`; errors are
// "SOURCE:LINE: key 'gpu.X': problem" like the parser's others.
Status ReadGpu(const toml::node& node, std::string_view source, GpuConfig& out);

}  // namespace isometry
