// The Memcpy channel: host memory (SYS/REG/ZCM) to host memory, executing
// any copy program, so it is the channel that converts layouts.
#pragma once

#include <memory>

#include "channels/channel.h"
#include "channels/channel_backend.h"
#include "config/runtime_config.h"

namespace isometry {

// Starts `config.threads` worker threads. Fails on a config that is not a
// memcpy channel.
Result<std::unique_ptr<Channel>> MakeMemcpyChannel(const ChannelConfig& config);

// The memcpy kind's descriptor (channel_backend.h).
const ChannelBackend& MemcpyBackend();

}  // namespace isometry
