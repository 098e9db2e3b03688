#include "channels/channel_factory.h"

#include "channels/disk/disk_channel.h"
#include "channels/memcpy/memcpy_channel.h"

namespace isometry {

Result<std::unique_ptr<Channel>> MakeChannel(const ChannelConfig& config) {
  switch (config.kind) {
    case ChannelKind::kMemcpy:
      return MakeMemcpyChannel(config);
    case ChannelKind::kDiskRead:
    case ChannelKind::kDiskWrite:
      return MakeDiskChannel(config);
    default:
      break;
  }
  return FailedPrecondition("channel '", config.name, "': kind ", ChannelKindName(config.kind),
                            " is not available in this build");
}

}  // namespace isometry
