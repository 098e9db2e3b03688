#include "config/gpu_config.h"

#include <algorithm>
#include <set>

#include "config/config_origin.h"
#include "config/config_parser.h"
#include "config/gpu_config_parser.h"
#include "config/runtime_config.h"
#include "core/strings.h"

namespace isometry {

Status GpuConfig::Validate() const {
  if (request_bytes < 4096) {
    return ConfigKeyError("gpu.request_size", "is ", request_bytes,
                          "; it must be at least 4096 bytes");
  }
  if (max_in_flight < 1 || max_in_flight > 64) {
    return ConfigKeyError("gpu.max_in_flight", "is ", max_in_flight, "; it must be from 1 to 64");
  }
  return OkStatus();
}

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

Status ReadGpu(const toml::node& node, std::string_view source, GpuConfig& out) {
  auto error = [source](const toml::node& n, std::string_view key, std::string_view problem) {
    return InvalidArgument(source, ":", n.source().begin.line, ": key '", key, "': ", problem);
  };
  const toml::table* t = node.as_table();
  if (!t) return error(node, "gpu", "must be a table ([gpu])");
  for (const auto& [k, v] : *t) {
    const std::string key = StrCat("gpu.", k.str());
    if (k.str() == "auto_memories") {
      const std::optional<bool> b = v.is_boolean() ? v.value<bool>() : std::nullopt;
      if (!b) return error(v, key, "must be true or false");
      out.auto_memories = *b;
    } else if (k.str() == "staging" || k.str() == "request_size") {
      uint64_t bytes = 0;
      if (v.is_integer() && *v.value<int64_t>() >= 0) {
        bytes = static_cast<uint64_t>(*v.value<int64_t>());
      } else if (const std::optional<std::string> s = v.value<std::string>(); s && v.is_string()) {
        Result<uint64_t> parsed = ParseByteSize(*s);
        if (!parsed.ok()) return error(v, key, std::string(parsed.status().message()));
        bytes = *parsed;
      } else {
        return error(v, key, "must be a size like 4096 or \"32MiB\"");
      }
      (k.str() == "staging" ? out.staging_bytes : out.request_bytes) = bytes;
    } else if (k.str() == "max_in_flight") {
      const std::optional<int64_t> n = v.is_integer() ? v.value<int64_t>() : std::nullopt;
      if (!n || *n < 1 || *n > 64) return error(v, key, "must be an integer from 1 to 64");
      out.max_in_flight = static_cast<int>(*n);
    } else {
      return error(v, key,
                   "unknown key (known here: auto_memories, staging, request_size, "
                   "max_in_flight)");
    }
  }
  return OkStatus();
}

}  // namespace isometry
