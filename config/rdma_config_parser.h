// Internal to config/: [rdma] of the config file (config_parser.cc reads
// the other tables and calls this).
#pragma once

#include <toml++/toml.h>

#include <string_view>

#include "config/rdma_config.h"
#include "core/status.h"

namespace isometry {

// Reads the table at `node` (rdma) into `out`; errors are
// "SOURCE:LINE: key 'rdma.X': problem" like the parser's others.
Status ReadRdma(const toml::node& node, std::string_view source, RdmaConfig& out);

}  // namespace isometry
