#include "core/channel_kind.h"

#include <string>

#include "core/strings.h"

namespace isometry {

std::string_view ChannelKindName(ChannelKind kind) {
  switch (kind) {
    case ChannelKind::kMemcpy:
      return "memcpy";
    case ChannelKind::kCma:
      return "cma";
    case ChannelKind::kGpuRead:
      return "gpu_read";
    case ChannelKind::kGpuWrite:
      return "gpu_write";
    case ChannelKind::kGpuCopy:
      return "gpu_copy";
    case ChannelKind::kDiskRead:
      return "disk_read";
    case ChannelKind::kDiskWrite:
      return "disk_write";
    case ChannelKind::kRemoteMemcpy:
      return "remote_memcpy";
  }
  return "?";
}

bool ConvertsLayout(ChannelKind kind) {
  return kind != ChannelKind::kDiskRead && kind != ChannelKind::kDiskWrite;
}

std::optional<ChannelKind> ParseChannelKind(std::string_view name) {
  const std::string lower = AsciiLower(name);
  for (int k = 0; k <= static_cast<int>(ChannelKind::kRemoteMemcpy); ++k) {
    if (lower == ChannelKindName(static_cast<ChannelKind>(k))) {
      return static_cast<ChannelKind>(k);
    }
  }
  return std::nullopt;
}

}  // namespace isometry
