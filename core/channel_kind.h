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
// Whether a hop on this kind of channel may change the layout. Disk
// channels move whole runs between a file and memory (one I/O per run):
// a layout change there is millions of tiny I/Os, so the planners put it
// on a Memcpy hop instead (the caller may still force it with `via`).
bool ConvertsLayout(ChannelKind kind);
std::optional<ChannelKind> ParseChannelKind(std::string_view name);

}  // namespace isometry
