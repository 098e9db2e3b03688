#include "config/runtime_config.h"

#include "config/config_parser.h"

#include <map>
#include <set>

namespace isometry {

Status RuntimeConfig::Validate() const {
  if (memories.empty()) return InvalidArgument("config: no [[memory]] is defined");
  if (channels.empty()) return InvalidArgument("config: no [[channel]] is defined");
  if (slots_per_buffer < 1 || slots_per_buffer > 64) {
    return InvalidArgument("config: runtime.slots_per_buffer is ", slots_per_buffer,
                           "; it must be between 1 and 64");
  }
  if (space_threshold < 4096) {
    return InvalidArgument("config: runtime.space_threshold is ", space_threshold,
                           " bytes; it must be at least 4096");
  }
  std::map<std::string, MemoryKind> kinds;
  for (const MemoryConfig& m : memories) {
    if (m.name.empty()) return InvalidArgument("config: a memory has no name");
    if (!kinds.emplace(m.name, m.kind).second) {
      return InvalidArgument("config: memory '", m.name, "' is defined twice");
    }
    if (m.client_quota > m.pool_bytes) {
      return InvalidArgument("config: memory '", m.name, "' has client_quota ", m.client_quota,
                             " above its pool of ", m.pool_bytes, " bytes");
    }
    if (m.kind == MemoryKind::kDsk) {
      if (m.directory.empty()) {
        return InvalidArgument("config: DSK memory '", m.name, "' needs a directory");
      }
      if (m.pool_bytes) {
        return InvalidArgument("config: DSK memory '", m.name, "' cannot have a client pool");
      }
      // Past 2^63 - 1 no file offset can address it.
      if (m.max_file_bytes == 0 || m.max_file_bytes > (uint64_t{1} << 63) - 1) {
        return InvalidArgument("config: DSK memory '", m.name, "' has max_file_bytes ",
                               m.max_file_bytes, "; it must be between 1 and 2^63 - 1");
      }
      if (m.quota_bytes == 0) {
        return InvalidArgument("config: DSK memory '", m.name, "' has quota_bytes 0");
      }
    } else if (!IsHostMemory(m.kind)) {
      return InvalidArgument("config: memory '", m.name, "' has kind ", MemoryKindName(m.kind),
                             "; this build serves SYS, REG, ZCM and DSK memories");
    }
  }
  std::set<std::string> names;
  std::set<std::pair<std::string, std::string>> served;
  for (const ChannelConfig& c : channels) {
    if (c.name.empty()) return InvalidArgument("config: a channel has no name");
    if (!names.insert(c.name).second) {
      return InvalidArgument("config: channel '", c.name, "' is defined twice");
    }
    if (c.kind == ChannelKind::kRemoteMemcpy) continue;  // made per peer by the daemon
    if (c.kind != ChannelKind::kMemcpy && c.kind != ChannelKind::kDiskRead &&
        c.kind != ChannelKind::kDiskWrite) {
      return InvalidArgument("config: channel '", c.name, "' has kind ", ChannelKindName(c.kind),
                             "; this build provides memcpy, disk_read and disk_write channels");
    }
    if (c.threads < 1 || c.threads > 256) {
      return InvalidArgument("config: channel '", c.name, "' has ", c.threads,
                             " threads; between 1 and 256 are allowed");
    }
    if (c.max_in_flight < 0) {
      return InvalidArgument("config: channel '", c.name, "' has negative max_in_flight");
    }
    if (c.request_bytes < 4096) {
      return InvalidArgument("config: channel '", c.name, "' has request_size ",
                             c.request_bytes, "; it must be at least 4096 bytes");
    }
    for (const auto& [src, dst] : EdgesOf(c)) {
      for (const std::string& m : {src, dst}) {
        if (!kinds.count(m)) {
          return InvalidArgument("config: channel '", c.name, "' names unknown memory '", m, "'");
        }
      }
      const bool src_disk = kinds[src] == MemoryKind::kDsk, dst_disk = kinds[dst] == MemoryKind::kDsk;
      const bool fits = c.kind == ChannelKind::kMemcpy     ? !src_disk && !dst_disk
                        : c.kind == ChannelKind::kDiskRead ? src_disk && !dst_disk
                                                           : !src_disk && dst_disk;
      if (!fits) {
        return InvalidArgument("config: channel '", c.name, "' (", ChannelKindName(c.kind),
                               ") cannot serve ", src, " -> ", dst);
      }
      if (!served.insert({src, dst}).second) {
        return InvalidArgument("config: channel '", c.name, "' serves ", src, " -> ", dst,
                               ", which another channel already serves");
      }
    }
  }
  return OkStatus();
}

std::vector<std::pair<std::string, std::string>> RuntimeConfig::EdgesOf(
    const ChannelConfig& c) const {
  if (!c.edges.empty()) return c.edges;
  std::vector<std::pair<std::string, std::string>> edges;
  for (const MemoryConfig& a : memories) {
    for (const MemoryConfig& b : memories) {
      const bool a_disk = a.kind == MemoryKind::kDsk, b_disk = b.kind == MemoryKind::kDsk;
      const bool take = c.kind == ChannelKind::kMemcpy     ? !a_disk && !b_disk
                        : c.kind == ChannelKind::kDiskRead ? a_disk && !b_disk
                        : c.kind == ChannelKind::kDiskWrite ? !a_disk && b_disk
                                                            : false;
      if (take) edges.emplace_back(a.name, b.name);
    }
  }
  return edges;
}

Status DaemonConfig::Validate() const {
  if (local_socket.empty()) return InvalidArgument("config: daemon.local_socket is empty");
  if (grpc_socket.empty()) return InvalidArgument("config: daemon.grpc_socket is empty");
  if (local_socket == grpc_socket) {
    return InvalidArgument("config: daemon.local_socket and daemon.grpc_socket are the same path");
  }
  auto pow2 = [](uint32_t v) { return v >= 2 && v <= 65536 && (v & (v - 1)) == 0; };
  if (!pow2(sq_entries) || !pow2(cq_entries)) {
    return InvalidArgument("config: daemon.sq_entries and daemon.cq_entries must be powers of ",
                           "two between 2 and 65536");
  }
  if (socket_mode > 0777) return InvalidArgument("config: daemon.socket_mode is not a file mode");
  for (const char* level : {"trace", "debug", "info", "warn", "error"}) {
    if (log_level == level) return OkStatus();
  }
  return InvalidArgument("config: daemon.log_level '", log_level,
                         "' is not one of trace, debug, info, warn, error");
}

Status ClusterConfig::Validate() const {
  if (node_name.empty() || node_name.find(':') != std::string::npos) {
    return InvalidArgument("config: cluster.node_name '", node_name,
                           "' must be non-empty and without ':'");
  }
  if (data_connections < 1 || data_connections > 64) {
    return InvalidArgument("config: cluster.data_connections is ", data_connections,
                           "; it must be between 1 and 64");
  }
  if (request_bytes < 4096 || request_bytes > (256ull << 20)) {
    return InvalidArgument("config: cluster.request_size is ", request_bytes,
                           " bytes; it must be between 4 KiB and 256 MiB");
  }
  if (peer_timeout_ms < 100 || keepalive_ms < 10 || keepalive_ms >= peer_timeout_ms) {
    return InvalidArgument("config: cluster.keepalive_ms (", keepalive_ms,
                           ") must be at least 10 and below cluster.peer_timeout_ms (",
                           peer_timeout_ms, "), which must be at least 100");
  }
  std::set<std::string> names{node_name};
  for (const PeerConfig& p : peers) {
    if (p.name.empty() || p.name.find(':') != std::string::npos) {
      return InvalidArgument("config: a peer's name '", p.name, "' must be non-empty, no ':'");
    }
    if (!names.insert(p.name).second) {
      return InvalidArgument("config: peer '", p.name, "' is listed twice or is this node");
    }
    if (p.address.find(':') == std::string::npos) {
      return InvalidArgument("config: peer '", p.name, "' address '", p.address,
                             "' is not host:port");
    }
  }
  if (!peers.empty() && secret_file.empty()) {
    return InvalidArgument("config: cluster.secret_file is required when peers are listed");
  }
  return OkStatus();
}

void AddDiskMemory(RuntimeConfig& config, const std::string& directory) {
  MemoryConfig dsk;
  dsk.name = "dsk0";
  dsk.kind = MemoryKind::kDsk;
  dsk.staging_bytes = 0;
  dsk.directory = directory;
  config.memories.push_back(dsk);
  ChannelConfig read = config.channels.front(), write = config.channels.front();
  read.name = "disk_read0";
  read.kind = ChannelKind::kDiskRead;
  read.edges.clear();
  write.name = "disk_write0";
  write.kind = ChannelKind::kDiskWrite;
  write.edges.clear();
  config.channels.push_back(read);
  config.channels.push_back(write);
}

RuntimeConfig DefaultRuntimeConfig() {
  // One source of truth: the embedded TOML, which is tested to parse.
  return *ParseRuntimeConfig(EmbeddedDefaultConfig(), "<embedded default>");
}

}  // namespace isometry
