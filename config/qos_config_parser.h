// Internal to config/: [qos] of the config file (config_parser.cc reads
// the other tables and calls this).
#pragma once

#include <toml++/toml.h>

#include <string_view>

#include "config/qos_config.h"
#include "core/status.h"

namespace isometry {

// Reads the table at `node` (qos) into `out`; errors are
// "SOURCE:LINE: key 'qos.X': problem" like the parser's others. The
// cross-field checks are QosConfig::Validate's.
Status ReadQos(const toml::node& node, std::string_view source, QosConfig& out);

}  // namespace isometry
