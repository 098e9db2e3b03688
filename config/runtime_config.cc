#include "config/runtime_config.h"

#include <map>
#include <set>

#include "config/config_parser.h"
#include "core/strings.h"

namespace isometry {

namespace {

// One [[memory]] entry; `key` is its indexed name (memory[1]).
Status ValidateMemory(const MemoryConfig& m, const std::string& key) {
  if (m.client_quota > m.pool_bytes) {
    return ConfigKeyError(key + ".client_quota", "memory '", m.name, "' has client_quota ",
                          m.client_quota, " above its pool of ", m.pool_bytes, " bytes");
  }
  if (m.kind == MemoryKind::kDsk) {
    if (m.directory.empty()) {
      return ConfigKeyError(key + ".directory", "DSK memory '", m.name, "' needs a directory");
    }
    if (m.pool_bytes) {
      return ConfigKeyError(key + ".pool", "DSK memory '", m.name, "' cannot have a client pool");
    }
    // Past 2^63 - 1 no file offset can address it.
    if (m.max_file_bytes == 0 || m.max_file_bytes > (uint64_t{1} << 63) - 1) {
      return InvalidArgument("config: DSK memory '", m.name, "' has max_file_bytes ",
                             m.max_file_bytes, "; it must be between 1 and 2^63 - 1");
    }
    if (m.quota_bytes == 0) {
      return InvalidArgument("config: DSK memory '", m.name, "' has quota_bytes 0");
    }
  } else if (m.kind == MemoryKind::kFbm) {
    if (m.device < 0) {
      return ConfigKeyError(key + ".device", "FBM memory '", m.name,
                            "' needs a device (the GPU's CUDA device number, from 0)");
    }
    // Clients get no allocations in GPU memory yet (docs/guides/gpu.md, "GPU (CUDA) channels"):
    // an FBM memory is staging for paths through the GPU.
    if (m.pool_bytes) {
      return ConfigKeyError(key + ".pool", "FBM memory '", m.name,
                            "' cannot have a client pool yet (clients' GPU allocations are not "
                            "available)");
    }
    if (m.hugetlb) {
      return ConfigKeyError(key + ".hugetlb", "FBM memory '", m.name, "' is device memory");
    }
  } else if (!IsHostMemory(m.kind)) {
    return ConfigKeyError(key + ".kind", "memory '", m.name, "' has kind ", MemoryKindName(m.kind),
                          "; this build serves SYS, REG, ZCM, FBM and DSK memories");
  }
  if (m.kind != MemoryKind::kFbm && m.device != -1) {
    return ConfigKeyError(key + ".device", "memory '", m.name,
                          "': device applies to FBM memories only");
  }
  return OkStatus();
}

// One local [[channel]] entry's own settings; `key` is its indexed name.
// Rules of its kind are the descriptors' (CheckChannelKinds).
Status ValidateChannelSettings(const ChannelConfig& c, const std::string& key) {
  if (c.threads < 1 || c.threads > 256) {
    return ConfigKeyError(key + ".threads", "channel '", c.name, "' has ", c.threads,
                          " threads; between 1 and 256 are allowed");
  }
  if (c.max_in_flight < 0) {
    return ConfigKeyError(key + ".max_in_flight", "channel '", c.name,
                          "' has negative max_in_flight");
  }
  if (c.request_bytes < 4096) {
    return ConfigKeyError(key + ".request_size", "channel '", c.name, "' has request_size ",
                          c.request_bytes, "; it must be at least 4096 bytes");
  }
  return OkStatus();
}

// The edges written for one local channel name known memories. Whether
// its kind serves them, and the default edges of a channel without any,
// are the channel descriptors' to judge (channels/channel_edges.h).
Status ValidateWrittenEdges(const ChannelConfig& c, const std::string& key,
                            const std::map<std::string, MemoryKind>& kinds) {
  for (size_t e = 0; e < c.edges.size(); ++e) {
    for (const std::string& m : {c.edges[e].first, c.edges[e].second}) {
      if (!kinds.count(m)) {
        return ConfigKeyError(StrCat(key, ".edges[", e, "]"), "channel '", c.name,
                              "' names unknown memory '", m, "'");
      }
    }
  }
  return OkStatus();
}

}  // namespace

Status RuntimeConfig::Validate() const {
  // Every rejection names its key (indexed: memory[1].pool), so a parsed
  // file's origin can point at the line (ConfigOrigin::Locate).
  if (memories.empty()) {
    return ConfigKeyError("memory", "no [[memory]] is defined");
  }
  if (channels.empty()) {
    return ConfigKeyError("channel", "no [[channel]] is defined");
  }
  if (slots_per_buffer < 1 || slots_per_buffer > 64) {
    return ConfigKeyError("runtime.slots_per_buffer", "runtime.slots_per_buffer is ",
                          slots_per_buffer, "; it must be between 1 and 64");
  }
  if (space_threshold < 4096) {
    return ConfigKeyError("runtime.space_threshold", "runtime.space_threshold is ", space_threshold,
                          " bytes; it must be at least 4096");
  }
  std::map<std::string, MemoryKind> kinds;
  for (size_t i = 0; i < memories.size(); ++i) {
    const MemoryConfig& m = memories[i];
    const std::string key = StrCat("memory[", i, "]");
    if (m.name.empty()) {
      return ConfigKeyError(key + ".name", "a memory has no name");
    }
    if (!kinds.emplace(m.name, m.kind).second) {
      return ConfigKeyError(key + ".name", "memory '", m.name, "' is defined twice");
    }
    ISO_RETURN_IF_ERROR(ValidateMemory(m, key));
  }
  std::set<std::string> names;
  for (size_t i = 0; i < channels.size(); ++i) {
    const ChannelConfig& c = channels[i];
    const std::string key = StrCat("channel[", i, "]");
    if (c.name.empty()) {
      return ConfigKeyError(key + ".name", "a channel has no name");
    }
    if (!names.insert(c.name).second) {
      return ConfigKeyError(key + ".name", "channel '", c.name, "' is defined twice");
    }
    if (!c.peer.empty()) {
      continue;  // made per peer by the daemon (PeerChannels), from [cluster]'s checked settings
    }
    ISO_RETURN_IF_ERROR(ValidateChannelSettings(c, key));
    ISO_RETURN_IF_ERROR(ValidateWrittenEdges(c, key, kinds));
  }
  return OkStatus();
}

Status DaemonConfig::Validate() const {
  if (local_socket.empty()) {
    return ConfigKeyError("daemon.local_socket", "is empty");
  }
  if (grpc_socket.empty()) {
    return ConfigKeyError("daemon.grpc_socket", "is empty");
  }
  if (local_socket == grpc_socket) {
    return ConfigKeyError("daemon.grpc_socket",
                          "daemon.local_socket and daemon.grpc_socket are the same path");
  }
  auto pow2 = [](uint32_t v) { return v >= 2 && v <= 65536 && (v & (v - 1)) == 0; };
  for (const auto& [key, v] :
       {std::pair{"daemon.sq_entries", sq_entries}, std::pair{"daemon.cq_entries", cq_entries}}) {
    if (!pow2(v)) {
      return ConfigKeyError(key, "is ", v,
                            "; ring sizes must be powers of two between 2 and "
                            "65536");
    }
  }
  if (socket_mode > 0777) {
    return ConfigKeyError("daemon.socket_mode", "is not a file mode");
  }
  for (const auto& [key, v] : {std::pair{"daemon.access_log_bytes", access_log_bytes},
                               std::pair{"daemon.max_access_log_bytes", max_access_log_bytes}}) {
    if (v < 4096 || (v & (v - 1)) != 0) {
      return ConfigKeyError(key, "is ", v, "; access log sizes are powers of two >= 4096");
    }
  }
  if (access_log_bytes > max_access_log_bytes) {
    return ConfigKeyError("daemon.access_log_bytes", "is larger than daemon.max_access_log_bytes");
  }
  if (access_log_full != "block" && access_log_full != "fail") {
    return ConfigKeyError("daemon.access_log_full", "is '", access_log_full,
                          "'; it is \"block\" or \"fail\"");
  }
  for (const char* level : {"trace", "debug", "info", "warn", "error"}) {
    if (log_level == level) {
      return OkStatus();
    }
  }
  return ConfigKeyError("daemon.log_level", "daemon.log_level '", log_level,
                        "' is not one of trace, debug, info, warn, error");
}

Status ClusterConfig::Validate() const {
  if (node_name.empty() || node_name.find(':') != std::string::npos) {
    return ConfigKeyError("cluster.node_name", "cluster.node_name '", node_name,
                          "' must be non-empty and without ':'");
  }
  if (data_connections < 1 || data_connections > 64) {
    return ConfigKeyError("cluster.data_connections", "cluster.data_connections is ",
                          data_connections, "; it must be between 1 and 64");
  }
  if (request_bytes < 4096 || request_bytes > (256ull << 20)) {
    return ConfigKeyError("cluster.request_size", "cluster.request_size is ", request_bytes,
                          " bytes; it must be between 4 KiB and 256 MiB");
  }
  if (unsent_limit_bytes != 0 &&
      (unsent_limit_bytes < (16u << 10) || unsent_limit_bytes > (64ull << 20))) {
    return ConfigKeyError("cluster.unsent_limit", "cluster.unsent_limit is ", unsent_limit_bytes,
                          " bytes; it must be 0 (no limit) or between 16 KiB and 64 MiB");
  }
  if (eager_put_bytes > (1ull << 20)) {
    return ConfigKeyError("cluster.eager_put_size", "cluster.eager_put_size is ", eager_put_bytes,
                          " bytes; at most 1 MiB goes in one call");
  }
  if (peer_timeout_ms < 100 || keepalive_ms < 10 || keepalive_ms >= peer_timeout_ms) {
    return ConfigKeyError(
        peer_timeout_ms < 100 ? "cluster.peer_timeout_ms" : "cluster.keepalive_ms",
        "cluster.keepalive_ms (", keepalive_ms,
        ") must be at least 10 and below cluster.peer_timeout_ms (", peer_timeout_ms,
        "), which must be at least 100");
  }
  std::set<std::string> names{node_name};
  for (size_t i = 0; i < peers.size(); ++i) {
    const PeerConfig& p = peers[i];
    const std::string key = StrCat("peer[", i, "]");
    if (p.name.empty() || p.name.find(':') != std::string::npos) {
      return ConfigKeyError(key + ".name", "a peer's name '", p.name,
                            "' must be non-empty, no ':'");
    }
    if (!names.insert(p.name).second) {
      return ConfigKeyError(key + ".name", "peer '", p.name, "' is listed twice or is this node");
    }
    if (p.address.find(':') == std::string::npos) {
      return ConfigKeyError(key + ".address", "peer '", p.name, "' address '", p.address,
                            "' is not host:port");
    }
  }
  if (tls.enabled()) {
    for (const auto& [key, value] : {std::pair{"cluster.tls.ca_file", &tls.ca_file},
                                     std::pair{"cluster.tls.cert_file", &tls.cert_file},
                                     std::pair{"cluster.tls.key_file", &tls.key_file}}) {
      if (value->empty()) {
        return ConfigKeyError(key, key,
                              " is required with [cluster.tls] (ca_file, cert_file and key_file "
                              "go together)");
      }
    }
  }
  // etcd only says where peers are: without a secret or TLS anyone who
  // can write a record would be a peer.
  if (clustered() && secret_file.empty() && !tls.enabled()) {
    return ConfigKeyError("cluster.secret_file",
                          "cluster.secret_file is required when peers are listed or "
                          "[cluster.etcd] is set (or set [cluster.tls] for mutual TLS)");
  }
  return OkStatus();
}

Result<HostPort> ParseHostPort(std::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) {
    return InvalidArgument("'", address, "' is not host:port (e.g. \"127.0.0.1:9464\")");
  }
  HostPort out;
  std::string_view host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  out.host = std::string(host);
  const std::string_view port = address.substr(colon + 1);
  // 0 stands for "not a number" too: a scraper needs a fixed port.
  const uint32_t n = ParseNumber<uint32_t>(port).value_or(0);
  if (out.host.empty() || out.host.find_first_of("[] ") != std::string::npos || n == 0 ||
      n > 65535) {
    return InvalidArgument("'", address,
                           "' is not host:port with a port from 1 to 65535 (e.g. "
                           "\"127.0.0.1:9464\", \"[::1]:9464\")");
  }
  out.port = static_cast<uint16_t>(n);
  return out;
}

Status MetricsConfig::Validate() const {
  if (!enabled) {
    return OkStatus();
  }
  if (Result<HostPort> hp = ParseHostPort(listen); !hp.ok()) {
    return ConfigKeyError("metrics.listen", "metrics.listen ", hp.status().message());
  }
  return OkStatus();
}

Status Config::Validate() const {
  ISO_RETURN_IF_ERROR(runtime.Validate());
  ISO_RETURN_IF_ERROR(daemon.Validate());
  ISO_RETURN_IF_ERROR(cluster.Validate());
  ISO_RETURN_IF_ERROR(metrics.Validate());
  ISO_RETURN_IF_ERROR(rdma.Validate());
  ISO_RETURN_IF_ERROR(gpu.Validate());
  ISO_RETURN_IF_ERROR(qos.Validate());
  if (cluster.clustered() && daemon.grpc_tcp.empty()) {
    return ConfigKeyError("daemon.grpc_tcp",
                          "peers are listed (or [cluster.etcd] set) but daemon.grpc_tcp is empty; "
                          "peers reach this node's gRPC service over TCP");
  }
  return OkStatus();
}

RuntimeConfig DefaultRuntimeConfig() {
  // One source of truth: the embedded TOML, which is tested to parse.
  return *ParseRuntimeConfig(EmbeddedDefaultConfig(), kEmbeddedDefaultSource);
}

}  // namespace isometry
