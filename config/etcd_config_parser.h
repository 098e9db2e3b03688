// Internal to config/: [cluster.etcd] of the config file (config_parser.cc
// reads the rest of [cluster] and calls this).
#pragma once

#include <toml++/toml.h>

#include <string_view>

#include "config/runtime_config.h"
#include "core/status.h"

namespace isometry {

// Reads the table at `node` (cluster.etcd) into `out`; errors are
// "SOURCE:LINE: key 'cluster.etcd.X': problem" like the parser's others.
Status ReadClusterEtcd(const toml::node& node, std::string_view source, EtcdConfig& out);

}  // namespace isometry
