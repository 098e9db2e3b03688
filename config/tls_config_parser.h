// Internal to config/: [cluster.tls] of the config file (config_parser.cc
// reads the rest of [cluster] and calls this).
#pragma once

#include <toml++/toml.h>

#include <string_view>

#include "config/runtime_config.h"
#include "core/status.h"

namespace isometry {

// Reads the table at `node` (cluster.tls) into `out`; errors are
// "SOURCE:LINE: key 'cluster.tls.X': problem" like the parser's others.
Status ReadClusterTls(const toml::node& node, std::string_view source, TlsConfig& out);

}  // namespace isometry
