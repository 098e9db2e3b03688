// Typed runtime configuration: memories, channels, buffer limits.
//
// Parsed once from TOML (or the embedded default) and validated; the
// runtime, channels and tools receive these structs and never read the
// environment or files themselves.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/channel_kind.h"
#include "core/memory.h"
#include "core/status.h"

namespace isometry {

struct MemoryConfig {
  std::string name;  // unique on this node, e.g. "sys0"
  MemoryKind kind = MemoryKind::kSys;
  // Budget for the runtime's intermediate buffers in this memory: the sum of
  // all transfers' staging here never exceeds it; transfers that do not fit
  // wait in the admission queue.
  uint64_t staging_bytes = 256ull << 20;
};

struct ChannelConfig {
  std::string name;  // unique, shown by isoctl
  ChannelKind kind = ChannelKind::kMemcpy;
  // Directed memory pairs (by name) this channel serves. Empty: every pair of
  // host memories (self-loops included), the Memcpy channel's default.
  std::vector<std::pair<std::string, std::string>> edges;
  int threads = 2;            // worker threads
  int max_in_flight = 0;      // requests in flight; 0 = threads
  uint64_t request_bytes = 4ull << 20;  // preferred request size
  // Bandwidth cap in bytes/s for QoS; 0 = unlimited.
  uint64_t rate_limit_bytes_per_s = 0;
};

struct RuntimeConfig {
  uint32_t node = 0;
  std::vector<MemoryConfig> memories;
  std::vector<ChannelConfig> channels;
  // Space threshold TH (Isometry §4.1): no intermediate buffer (all its
  // slots together) is larger.
  uint64_t space_threshold = 32ull << 20;
  int slots_per_buffer = 2;  // ring depth of intermediate buffers (>= 2 pipelines)
  size_t program_cache_entries = 4096;

  // Cross-field checks: unique names, edges naming known memories, one
  // channel per edge, sane numbers.
  Status Validate() const;
};

// A single node with SYS, REG and ZCM host memories and one Memcpy channel.
RuntimeConfig DefaultRuntimeConfig();

}  // namespace isometry
