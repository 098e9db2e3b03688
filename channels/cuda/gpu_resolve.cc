// ResolveGpus (channels/added_channels.h): the GPU kinds' rules for the
// memories and channels a machine's GPUs add to a config, and what a
// machine without one refuses.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "channels/added_channels.h"
#include "config/config_origin.h"
#include "config/runtime_config.h"
#include "core/strings.h"

namespace isometry {

namespace {

bool IsGpuChannel(ChannelKind k) {
  return k == ChannelKind::kGpuRead || k == ChannelKind::kGpuWrite || k == ChannelKind::kGpuCopy;
}

// Without a GPU: the first FBM memory or GPU channel, refused by its key.
Status RefuseWithoutGpu(const RuntimeConfig& config, const std::string& why) {
  for (size_t i = 0; i < config.memories.size(); ++i) {
    const MemoryConfig& m = config.memories[i];
    if (m.kind != MemoryKind::kFbm) continue;
    return ConfigKeyError(StrCat("memory[", i, "].kind"), "memory '", m.name,
                          "' is GPU memory (FBM), but this machine has no usable GPU: ", why);
  }
  for (size_t i = 0; i < config.channels.size(); ++i) {
    const ChannelConfig& c = config.channels[i];
    if (!IsGpuChannel(c.kind)) continue;
    return ConfigKeyError(StrCat("channel[", i, "].kind"), "channel '", c.name, "' (",
                          ChannelKindName(c.kind),
                          ") needs a GPU, and this machine has none: ", why);
  }
  return OkStatus();
}

// With GPUs: every configured FBM memory names one of them and fits it.
Status CheckDevices(const RuntimeConfig& config, const GpuInventory& inv) {
  const size_t count = inv.memory_bytes.size();
  for (size_t i = 0; i < config.memories.size(); ++i) {
    const MemoryConfig& m = config.memories[i];
    if (m.kind != MemoryKind::kFbm) continue;
    if (m.device < 0 || static_cast<size_t>(m.device) >= count) {
      return ConfigKeyError(StrCat("memory[", i, "].device"), "memory '", m.name, "' names GPU ",
                            m.device, "; this machine has ", count, " (devices 0 to ", count - 1,
                            ")");
    }
    const uint64_t have = inv.memory_bytes[static_cast<size_t>(m.device)];
    if (m.staging_bytes > have) {
      return ConfigKeyError(StrCat("memory[", i, "].staging"), "memory '", m.name, "' wants ",
                            m.staging_bytes, " bytes of staging; GPU ", m.device, " has ", have,
                            " bytes");
    }
  }
  return OkStatus();
}

bool NameTaken(const RuntimeConfig& config, const std::string& name) {
  return std::any_of(config.memories.begin(), config.memories.end(),
                     [&](const MemoryConfig& m) { return m.name == name; }) ||
         std::any_of(config.channels.begin(), config.channels.end(),
                     [&](const ChannelConfig& c) { return c.name == name; });
}

// gpu_copy's edges: every FBM memory to itself and to the others on its
// device or on a device it has peer access to.
std::vector<std::pair<std::string, std::string>> CopyEdges(const RuntimeConfig& config,
                                                           const GpuInventory& inv) {
  std::vector<std::pair<std::string, std::string>> edges;
  for (const MemoryConfig& a : config.memories) {
    for (const MemoryConfig& b : config.memories) {
      if (a.kind != MemoryKind::kFbm || b.kind != MemoryKind::kFbm) continue;
      const auto da = static_cast<size_t>(a.device), db = static_cast<size_t>(b.device);
      const bool peer =
          da < inv.peer_access.size() && db < inv.peer_access[da].size() && inv.peer_access[da][db];
      if (da == db || peer) edges.emplace_back(a.name, b.name);
    }
  }
  return edges;
}

}  // namespace

Result<std::string> ResolveGpus(RuntimeConfig& config, const GpuConfig& gpu,
                                const GpuInventory& inventory) {
  if (inventory.memory_bytes.empty()) {
    ISO_RETURN_IF_ERROR(RefuseWithoutGpu(config, inventory.why_none));
    return std::string();
  }
  ISO_RETURN_IF_ERROR(CheckDevices(config, inventory));
  if (!gpu.auto_memories) return std::string();
  std::string added;
  const bool any_fbm =
      std::any_of(config.memories.begin(), config.memories.end(),
                  [](const MemoryConfig& m) { return m.kind == MemoryKind::kFbm; });
  if (!any_fbm) {
    for (size_t d = 0; d < inventory.memory_bytes.size(); ++d) {
      MemoryConfig m;
      m.name = StrCat("gpu", d);
      if (NameTaken(config, m.name)) {
        return ConfigKeyError("gpu.auto_memories", "a GPU memory would be named '", m.name,
                              "', which the file already uses; rename it or set "
                              "gpu.auto_memories = false");
      }
      m.kind = MemoryKind::kFbm;
      m.device = static_cast<int>(d);
      m.staging_bytes = std::min(gpu.staging_bytes, inventory.memory_bytes[d]);
      config.memories.push_back(m);
      StrAppend(&added, added.empty() ? "" : ", ", m.name, " (FBM, device ", d, ", staging ",
                m.staging_bytes >> 20, " MiB)");
    }
  }
  const bool has_host_memory =
      std::any_of(config.memories.begin(), config.memories.end(),
                  [](const MemoryConfig& m) { return IsHostMemory(m.kind); });
  for (const ChannelKind kind :
       {ChannelKind::kGpuWrite, ChannelKind::kGpuRead, ChannelKind::kGpuCopy}) {
    if (std::any_of(config.channels.begin(), config.channels.end(),
                    [kind](const ChannelConfig& c) { return c.kind == kind; })) {
      continue;
    }
    ChannelConfig c;
    c.name = StrCat(ChannelKindName(kind), "0");
    if (NameTaken(config, c.name)) {
      return ConfigKeyError("gpu.auto_memories", "a GPU channel would be named '", c.name,
                            "', which the file already uses; rename it or set "
                            "gpu.auto_memories = false");
    }
    c.kind = kind;
    c.threads = 1;
    c.max_in_flight = gpu.max_in_flight;
    c.request_bytes = gpu.request_bytes;
    if (kind == ChannelKind::kGpuCopy) {
      c.edges = CopyEdges(config, inventory);
      if (c.edges.empty()) continue;
    } else if (!has_host_memory) {
      continue;  // gpu_read and gpu_write join host memory and device memory
    }
    StrAppend(&added, added.empty() ? "" : ", ", c.name, " (", ChannelKindName(kind), ")");
    config.channels.push_back(std::move(c));
  }
  // What was added must hold together with what was written.
  ISO_RETURN_IF_ERROR(config.Validate());
  return added;
}

}  // namespace isometry
