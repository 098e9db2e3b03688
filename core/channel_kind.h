// Channel kinds of Isometry table 2 (plus CMA): vocabulary shared by the
// planner, the channels and the runtime.
#pragma once

#include <optional>
#include <string_view>

namespace isometry {

enum class ChannelKind : uint8_t {
  kMemcpy,
  kCma,
  kGpuRead,
  kGpuWrite,
  kGpuCopy,
  kDiskRead,
  kDiskWrite,
  kRemoteMemcpy,
};

std::string_view ChannelKindName(ChannelKind kind);
std::optional<ChannelKind> ParseChannelKind(std::string_view name);

}  // namespace isometry
