#include "core/channel_kind.h"

#include <iterator>
#include <string>

#include "core/strings.h"

namespace isometry {

namespace {

// The kinds' names in configs, logs and the wire, in ChannelKind order.
// Each channel folder's descriptor repeats its own (ChannelBackend::name);
// channel_factory_test checks they agree.
constexpr std::string_view kNames[] = {"memcpy",   "cma",       "gpu_read",   "gpu_write",
                                       "gpu_copy", "disk_read", "disk_write", "remote_memcpy"};
static_assert(std::size(kNames) == static_cast<size_t>(ChannelKind::kRemoteMemcpy) + 1);

}  // namespace

std::string_view ChannelKindName(ChannelKind kind) {
  const auto k = static_cast<size_t>(kind);
  return k < std::size(kNames) ? kNames[k] : "?";
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
