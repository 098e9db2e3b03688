// The one place that maps a channel config to an implementation. Build
// switches for optional backends (CUDA, ibverbs) live here and nowhere else.
#pragma once

#include <memory>

#include "channels/channel.h"
#include "config/runtime_config.h"

namespace isometry {

Result<std::unique_ptr<Channel>> MakeChannel(const ChannelConfig& config);

}  // namespace isometry
