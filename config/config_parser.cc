#include "config/config_parser.h"

#include <toml++/toml.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "config/config_reader.h"
#include "config/etcd_config_parser.h"
#include "config/gpu_config_parser.h"
#include "config/qos_config_parser.h"
#include "config/rdma_config_parser.h"
#include "config/tls_config_parser.h"
#include "core/strings.h"

namespace isometry {
namespace {

Status ReadRuntime(const Reader& r, const toml::table& t, RuntimeConfig& c) {
  ISO_RETURN_IF_ERROR(r.OnlyKeys(
      t, "runtime.",
      {"node", "space_threshold", "slots_per_buffer", "program_cache_entries",
       "program_cache_bytes", "inline_bytes", "full_planner_threshold", "plan_cache_entries"}));
  if (const toml::node* n = t.get("node")) {
    // Transfer ids carry the node in 24 bits (daemon/runtime/runtime.h).
    ISO_ASSIGN_OR_RETURN(int64_t v, r.Integer(*n, "runtime.node", 0, 0xFFFFFF));
    c.node = static_cast<uint32_t>(v);
  }
  if (const toml::node* n = t.get("space_threshold")) {
    ISO_ASSIGN_OR_RETURN(c.space_threshold, r.Size(*n, "runtime.space_threshold"));
  }
  if (const toml::node* n = t.get("slots_per_buffer")) {
    ISO_ASSIGN_OR_RETURN(int64_t v, r.Integer(*n, "runtime.slots_per_buffer", 1, 64));
    c.slots_per_buffer = static_cast<int>(v);
  }
  if (const toml::node* n = t.get("full_planner_threshold")) {
    ISO_ASSIGN_OR_RETURN(c.full_planner_threshold, r.Size(*n, "runtime.full_planner_threshold"));
  }
  if (const toml::node* n = t.get("plan_cache_entries")) {
    ISO_ASSIGN_OR_RETURN(int64_t v, r.Integer(*n, "runtime.plan_cache_entries", 0, 1 << 24));
    c.plan_cache_entries = static_cast<size_t>(v);
  }
  if (const toml::node* n = t.get("inline_bytes")) {
    ISO_ASSIGN_OR_RETURN(c.inline_bytes, r.Size(*n, "runtime.inline_bytes"));
  }
  if (const toml::node* n = t.get("program_cache_entries")) {
    ISO_ASSIGN_OR_RETURN(int64_t v, r.Integer(*n, "runtime.program_cache_entries", 1, 1 << 24));
    c.program_cache_entries = static_cast<size_t>(v);
  }
  if (const toml::node* n = t.get("program_cache_bytes")) {
    ISO_ASSIGN_OR_RETURN(c.program_cache_bytes, r.Size(*n, "runtime.program_cache_bytes"));
  }
  return OkStatus();
}

// daemon.cpu_latency_us: absent unless written (daemon/cpu_latency.h).
Status ReadCpuLatency(const Reader& r, const toml::table& t, DaemonConfig& c) {
  if (const toml::node* n = t.get("cpu_latency_us")) {
    ISO_ASSIGN_OR_RETURN(int64_t v, r.Integer(*n, "daemon.cpu_latency_us", 0, 1000000));
    c.cpu_latency_us = static_cast<uint32_t>(v);
  }
  return OkStatus();
}

// daemon.socket_mode: an octal string ("0660").
Status ReadSocketMode(const Reader& r, const toml::table& t, DaemonConfig& c) {
  const toml::node* n = t.get("socket_mode");
  if (!n) return OkStatus();
  ISO_ASSIGN_OR_RETURN(std::string mode, r.String(*n, "daemon.socket_mode"));
  unsigned v = 0;
  const auto [end, ec] = std::from_chars(mode.data(), mode.data() + mode.size(), v, 8);
  if (ec != std::errc() || end != mode.data() + mode.size() || v > 0777) {
    return r.Error(*n, "daemon.socket_mode", "must be an octal mode like \"0660\"");
  }
  c.socket_mode = v;
  return OkStatus();
}

// daemon.priority_ceilings: { "UID" = ceiling, ... }.
Status ReadPriorityCeilings(const Reader& r, const toml::table& t, DaemonConfig& c) {
  const toml::node* n = t.get("priority_ceilings");
  if (!n) return OkStatus();
  const toml::table* table = n->as_table();
  if (!table) {
    return r.Error(*n, "daemon.priority_ceilings", "must be a table like { \"1000\" = 50 }");
  }
  for (const auto& [k, v] : *table) {
    const std::string key = StrCat("daemon.priority_ceilings.", k.str());
    uint32_t uid = 0;
    const auto [end, ec] = std::from_chars(k.str().data(), k.str().data() + k.str().size(), uid);
    if (ec != std::errc() || end != k.str().data() + k.str().size()) {
      return r.Error(v, key, "the key must be a uid (a number)");
    }
    ISO_ASSIGN_OR_RETURN(int64_t ceiling,
                         r.Integer(v, key, 0, std::numeric_limits<int32_t>::max()));
    c.priority_ceilings[uid] = static_cast<int32_t>(ceiling);
  }
  return OkStatus();
}

// Every key of [daemon] (ReadDaemon refuses any other).
constexpr std::string_view kDaemonKeys[] = {
    "local_socket",
    "grpc_socket",
    "grpc_tcp",
    "socket_group",
    "socket_mode",
    "log_level",
    "state_dir",
    "sq_entries",
    "cq_entries",
    "max_sessions",
    "shutdown_grace_ms",
    "calibrate",
    "max_sessions_per_uid",
    "max_grpc_sessions",
    "max_connections_per_uid",
    "hello_timeout_ms",
    "max_pending_hellos_per_uid",
    "max_connection_threads",
    "max_transfers_per_session",
    "max_allocations_per_session",
    "max_instances_per_session",
    "max_private_ranges_per_session",
    "own_hop_window_mib",
    "own_hop_timeout_ms",
    "direct_reads",
    "ring_poll_us",
    "cpu_latency_us",
    "max_datatypes_per_session",
    "translate_threads",
    "translate_queue",
    "max_translates_per_session",
    "max_translate_weight",
    "max_distributed_per_uid",
    "redistribute_concurrency",
    "max_watched_regions_per_session",
    "max_watched_allocations_per_session",
    "max_priority",
    "priority_ceilings",
    "max_watch_threads",
    "max_watch_scratch_bytes_per_session",
    "max_attach_backlog_bytes",
    "max_watch_scratch_bytes",
    "max_datatype_bytes_per_session",
    "max_datatype_bytes",
    "access_log_bytes",
    "max_access_log_bytes",
    "access_log_full",
    "access_log_block_ms",
    "max_flush_ms",
    "checkpoint_max_deltas",
    "checkpoint_threads",
    "max_checkpoint_calls_per_session",
    "transfer_history",
};

Status ReadDaemon(const Reader& r, const toml::table& t, DaemonConfig& c) {
  ISO_RETURN_IF_ERROR(r.OnlyKeys(t, "daemon.", kDaemonKeys));
  struct StringKey {
    const char* key;
    std::string* out;
  };
  for (const StringKey& k :
       {StringKey{"local_socket", &c.local_socket}, StringKey{"grpc_socket", &c.grpc_socket},
        StringKey{"grpc_tcp", &c.grpc_tcp}, StringKey{"socket_group", &c.socket_group},
        StringKey{"log_level", &c.log_level}, StringKey{"state_dir", &c.state_dir},
        StringKey{"access_log_full", &c.access_log_full}}) {
    if (const toml::node* n = t.get(k.key)) {
      ISO_ASSIGN_OR_RETURN(*k.out, r.String(*n, StrCat("daemon.", k.key)));
    }
  }
  ISO_RETURN_IF_ERROR(ReadCpuLatency(r, t, c));
  ISO_RETURN_IF_ERROR(ReadPriorityCeilings(r, t, c));
  if (const toml::node* n = t.get("max_priority")) {
    ISO_ASSIGN_OR_RETURN(
        int64_t v, r.Integer(*n, "daemon.max_priority", 0, std::numeric_limits<int32_t>::max()));
    c.max_priority = static_cast<int32_t>(v);
  }
  for (const auto& [key, out] :
       {std::pair{"max_watch_scratch_bytes_per_session", &c.max_watch_scratch_bytes_per_session},
        std::pair{"max_watch_scratch_bytes", &c.max_watch_scratch_bytes},
        std::pair{"max_datatype_bytes_per_session", &c.max_datatype_bytes_per_session},
        std::pair{"max_datatype_bytes", &c.max_datatype_bytes},
        std::pair{"max_attach_backlog_bytes", &c.max_attach_backlog_bytes}}) {
    if (const toml::node* n = t.get(key)) {
      ISO_ASSIGN_OR_RETURN(*out, r.Size(*n, StrCat("daemon.", key)));
    }
  }
  if (const toml::node* n = t.get("max_attach_backlog_bytes");
      n && (c.max_attach_backlog_bytes < 4096 || c.max_attach_backlog_bytes > (1ull << 30))) {
    return r.Error(*n, "daemon.max_attach_backlog_bytes", "must be 4KiB to 1GiB");
  }
  for (const auto& [key, out] :
       {std::pair{"calibrate", &c.calibrate}, std::pair{"direct_reads", &c.direct_reads}}) {
    if (const toml::node* n = t.get(key)) {
      ISO_ASSIGN_OR_RETURN(*out, r.Bool(*n, StrCat("daemon.", key)));
    }
  }
  ISO_RETURN_IF_ERROR(ReadSocketMode(r, t, c));
  struct IntKey {
    const char* key;
    uint32_t* out;
    int64_t lo, hi;
  };
  for (const IntKey& k :
       {IntKey{"sq_entries", &c.sq_entries, 2, 65536},
        IntKey{"cq_entries", &c.cq_entries, 2, 65536},
        IntKey{"max_sessions", &c.max_sessions, 1, 1 << 20},
        IntKey{"shutdown_grace_ms", &c.shutdown_grace_ms, 0, 3600000},
        IntKey{"max_sessions_per_uid", &c.max_sessions_per_uid, 1, 1 << 20},
        IntKey{"max_grpc_sessions", &c.max_grpc_sessions, 0, 1 << 20},
        IntKey{"max_connections_per_uid", &c.max_connections_per_uid, 1, 1 << 20},
        IntKey{"hello_timeout_ms", &c.hello_timeout_ms, 100, 600000},
        IntKey{"max_pending_hellos_per_uid", &c.max_pending_hellos_per_uid, 1, 1 << 20},
        IntKey{"max_connection_threads", &c.max_connection_threads, 1, 1 << 20},
        IntKey{"max_transfers_per_session", &c.max_transfers_per_session, 1, 1 << 24},
        IntKey{"max_allocations_per_session", &c.max_allocations_per_session, 1, 1 << 20},
        IntKey{"max_instances_per_session", &c.max_instances_per_session, 1, 1 << 24},
        IntKey{"max_private_ranges_per_session", &c.max_private_ranges_per_session, 1, 1 << 16},
        IntKey{"own_hop_window_mib", &c.own_hop_window_mib, 0, 1024},
        IntKey{"own_hop_timeout_ms", &c.own_hop_timeout_ms, 1, 3600000},
        IntKey{"ring_poll_us", &c.ring_poll_us, 0, 100000},
        IntKey{"max_datatypes_per_session", &c.max_datatypes_per_session, 1, 1 << 20},
        IntKey{"translate_threads", &c.translate_threads, 1, 64},
        IntKey{"translate_queue", &c.translate_queue, 1, 1 << 16},
        IntKey{"max_translates_per_session", &c.max_translates_per_session, 1, 1 << 16},
        IntKey{"max_translate_weight", &c.max_translate_weight, 1, 1 << 20},
        IntKey{"max_distributed_per_uid", &c.max_distributed_per_uid, 1, 1 << 16},
        IntKey{"redistribute_concurrency", &c.redistribute_concurrency, 1, 1024},
        IntKey{"max_watched_regions_per_session", &c.max_watched_regions_per_session, 1, 1 << 16},
        IntKey{"max_watched_allocations_per_session", &c.max_watched_allocations_per_session, 1,
               1 << 16},
        IntKey{"max_watch_threads", &c.max_watch_threads, 1, 1 << 16},
        IntKey{"access_log_bytes", &c.access_log_bytes, 4096, 1 << 30},
        IntKey{"max_access_log_bytes", &c.max_access_log_bytes, 4096, 1 << 30},
        IntKey{"access_log_block_ms", &c.access_log_block_ms, 1, 3600000},
        IntKey{"max_flush_ms", &c.max_flush_ms, 1, 3600000},
        IntKey{"checkpoint_max_deltas", &c.checkpoint_max_deltas, 1, 65536},
        IntKey{"checkpoint_threads", &c.checkpoint_threads, 1, 64},
        IntKey{"max_checkpoint_calls_per_session", &c.max_checkpoint_calls_per_session, 1, 1024},
        IntKey{"transfer_history", &c.transfer_history, 0, 1 << 16}}) {
    if (const toml::node* n = t.get(k.key)) {
      ISO_ASSIGN_OR_RETURN(int64_t v, r.Integer(*n, StrCat("daemon.", k.key), k.lo, k.hi));
      *k.out = static_cast<uint32_t>(v);
    }
  }
  return OkStatus();
}

Status ReadCluster(const Reader& r, const toml::table& t, ClusterConfig& c) {
  ISO_RETURN_IF_ERROR(
      r.OnlyKeys(t, "cluster.",
                 {"node_name", "secret_file", "data_listen", "data_connections", "checksum",
                  "peer_timeout_ms", "keepalive_ms", "request_size", "rate_limit", "link_rate",
                  "eager_put_size", "tls", "etcd", "data_max_handshakes", "unsent_limit"}));
  if (const toml::node* n = t.get("tls")) {
    ISO_RETURN_IF_ERROR(ReadClusterTls(*n, r.source(), c.tls));
  }
  if (const toml::node* n = t.get("etcd")) {
    ISO_RETURN_IF_ERROR(ReadClusterEtcd(*n, r.source(), c.etcd));
  }
  for (const auto& [key, out] :
       {std::pair{"node_name", &c.node_name}, std::pair{"secret_file", &c.secret_file},
        std::pair{"data_listen", &c.data_listen}}) {
    if (const toml::node* n = t.get(key)) {
      ISO_ASSIGN_OR_RETURN(*out, r.String(*n, StrCat("cluster.", key)));
    }
  }
  for (const auto& [key, out, hi] :
       {std::tuple{"data_connections", &c.data_connections, 64},
        std::tuple{"data_max_handshakes", &c.data_max_handshakes, 65536}}) {
    if (const toml::node* n = t.get(key)) {
      ISO_ASSIGN_OR_RETURN(int64_t v, r.Integer(*n, StrCat("cluster.", key), 1, hi));
      *out = static_cast<int>(v);
    }
  }
  if (const toml::node* n = t.get("checksum")) {
    ISO_ASSIGN_OR_RETURN(c.checksum, r.Bool(*n, "cluster.checksum"));
  }
  for (const auto& [key, out] : {std::pair{"peer_timeout_ms", &c.peer_timeout_ms},
                                 std::pair{"keepalive_ms", &c.keepalive_ms}}) {
    if (const toml::node* n = t.get(key)) {
      ISO_ASSIGN_OR_RETURN(int64_t v, r.Integer(*n, StrCat("cluster.", key), 1, 3600000));
      *out = static_cast<uint32_t>(v);
    }
  }
  for (const auto& [key, out] : {std::pair{"request_size", &c.request_bytes},
                                 std::pair{"rate_limit", &c.rate_limit_bytes_per_s},
                                 std::pair{"link_rate", &c.link_bytes_per_s},
                                 std::pair{"eager_put_size", &c.eager_put_bytes},
                                 std::pair{"unsent_limit", &c.unsent_limit_bytes}}) {
    if (const toml::node* n = t.get(key)) {
      ISO_ASSIGN_OR_RETURN(*out, r.Size(*n, StrCat("cluster.", key)));
    }
  }
  return OkStatus();
}

Status ReadMetrics(const Reader& r, const toml::table& t, MetricsConfig& c) {
  ISO_RETURN_IF_ERROR(
      r.OnlyKeys(t, "metrics.", {"listen", "max_connections", "request_timeout_ms"}));
  c.enabled = true;
  if (const toml::node* n = t.get("listen")) {
    ISO_ASSIGN_OR_RETURN(c.listen, r.String(*n, "metrics.listen"));
  }
  if (const toml::node* n = t.get("max_connections")) {
    ISO_ASSIGN_OR_RETURN(c.max_connections, r.Integer(*n, "metrics.max_connections", 1, 65536));
  }
  if (const toml::node* n = t.get("request_timeout_ms")) {
    ISO_ASSIGN_OR_RETURN(c.request_timeout_ms,
                         r.Integer(*n, "metrics.request_timeout_ms", 100, 60000));
  }
  return OkStatus();
}

Result<PeerConfig> ReadPeer(const Reader& r, const toml::table& t) {
  ISO_RETURN_IF_ERROR(r.OnlyKeys(t, "peer.", {"name", "address", "link_rate"}));
  PeerConfig p;
  for (const auto& [key, out] : {std::pair{"name", &p.name}, std::pair{"address", &p.address}}) {
    const toml::node* n = t.get(key);
    if (!n) {
      return r.Error(t, StrCat("peer.", key), "is required");
    }
    ISO_ASSIGN_OR_RETURN(*out, r.String(*n, StrCat("peer.", key)));
  }
  if (const toml::node* n = t.get("link_rate")) {
    ISO_ASSIGN_OR_RETURN(p.link_bytes_per_s, r.Size(*n, "peer.link_rate"));
    if (p.link_bytes_per_s == 0) return r.Error(*n, "peer.link_rate", "must be positive");
  }
  return p;
}

Result<MemoryConfig> ReadMemory(const Reader& r, const toml::table& t) {
  ISO_RETURN_IF_ERROR(
      r.OnlyKeys(t, "memory.",
                 {"name", "kind", "staging", "pool", "client_quota", "hugetlb", "directory",
                  "max_file_bytes", "quota_bytes", "allow_hard_links", "device"}));
  MemoryConfig m;
  const toml::node* name = t.get("name");
  if (!name) {
    return r.Error(t, "memory.name", "is required");
  }
  ISO_ASSIGN_OR_RETURN(m.name, r.String(*name, "memory.name"));
  if (const toml::node* n = t.get("kind")) {
    ISO_ASSIGN_OR_RETURN(std::string kind, r.String(*n, "memory.kind"));
    auto k = ParseMemoryKind(kind);
    if (!k) {
      return r.Error(*n, "memory.kind", StrCat("unknown kind '", kind, "'"));
    }
    m.kind = *k;
  }
  if (const toml::node* n = t.get("staging")) {
    ISO_ASSIGN_OR_RETURN(m.staging_bytes, r.Size(*n, "memory.staging"));
  }
  if (const toml::node* n = t.get("pool")) {
    ISO_ASSIGN_OR_RETURN(m.pool_bytes, r.Size(*n, "memory.pool"));
  }
  if (const toml::node* n = t.get("client_quota")) {
    ISO_ASSIGN_OR_RETURN(m.client_quota, r.Size(*n, "memory.client_quota"));
  }
  if (m.client_quota == 0) {
    m.client_quota = m.pool_bytes;
  }
  if (const toml::node* n = t.get("directory")) {
    ISO_ASSIGN_OR_RETURN(m.directory, r.String(*n, "memory.directory"));
  }
  if (const toml::node* n = t.get("hugetlb")) {
    ISO_ASSIGN_OR_RETURN(m.hugetlb, r.Bool(*n, "memory.hugetlb"));
  }
  if (const toml::node* n = t.get("device")) {
    if (m.kind != MemoryKind::kFbm) {
      return r.Error(*n, "memory.device", "applies to FBM memories only");
    }
    ISO_ASSIGN_OR_RETURN(const int64_t d, r.Integer(*n, "memory.device", 0, 1023));
    m.device = static_cast<int>(d);
  }
  // DSK bounds (daemon/runtime/disk_memory.h); meaningless elsewhere.
  for (const char* key : {"max_file_bytes", "quota_bytes", "allow_hard_links"}) {
    const toml::node* n = t.get(key);
    if (n && m.kind != MemoryKind::kDsk) {
      return r.Error(*n, StrCat("memory.", key), "applies to DSK memories only");
    }
  }
  if (const toml::node* n = t.get("max_file_bytes")) {
    ISO_ASSIGN_OR_RETURN(m.max_file_bytes, r.Size(*n, "memory.max_file_bytes"));
    if (m.max_file_bytes == 0) {
      return r.Error(*n, "memory.max_file_bytes", "must be above 0");
    }
  }
  if (const toml::node* n = t.get("quota_bytes")) {
    ISO_ASSIGN_OR_RETURN(m.quota_bytes, r.Size(*n, "memory.quota_bytes"));
    if (m.quota_bytes == 0) {
      return r.Error(*n, "memory.quota_bytes", "must be above 0");
    }
  }
  if (const toml::node* n = t.get("allow_hard_links")) {
    ISO_ASSIGN_OR_RETURN(m.allow_hard_links, r.Bool(*n, "memory.allow_hard_links"));
  }
  return m;
}

Result<ChannelConfig> ReadChannel(const Reader& r, const toml::table& t) {
  ISO_RETURN_IF_ERROR(r.OnlyKeys(
      t, "channel.",
      {"name", "kind", "threads", "max_in_flight", "request_size", "rate_limit", "edges"}));
  ChannelConfig c;
  const toml::node* name = t.get("name");
  if (!name) {
    return r.Error(t, "channel.name", "is required");
  }
  ISO_ASSIGN_OR_RETURN(c.name, r.String(*name, "channel.name"));
  if (const toml::node* n = t.get("kind")) {
    ISO_ASSIGN_OR_RETURN(std::string kind, r.String(*n, "channel.kind"));
    auto k = ParseChannelKind(kind);
    if (!k) {
      return r.Error(*n, "channel.kind", StrCat("unknown kind '", kind, "'"));
    }
    c.kind = *k;
  }
  if (const toml::node* n = t.get("threads")) {
    ISO_ASSIGN_OR_RETURN(int64_t v, r.Integer(*n, "channel.threads", 1, 256));
    c.threads = static_cast<int>(v);
  }
  if (const toml::node* n = t.get("max_in_flight")) {
    ISO_ASSIGN_OR_RETURN(int64_t v, r.Integer(*n, "channel.max_in_flight", 0, 4096));
    c.max_in_flight = static_cast<int>(v);
  }
  if (const toml::node* n = t.get("request_size")) {
    ISO_ASSIGN_OR_RETURN(c.request_bytes, r.Size(*n, "channel.request_size"));
  }
  if (const toml::node* n = t.get("rate_limit")) {
    ISO_ASSIGN_OR_RETURN(c.rate_limit_bytes_per_s, r.Size(*n, "channel.rate_limit"));
  }
  if (const toml::node* n = t.get("edges")) {
    const toml::array* edges = n->as_array();
    if (!edges) {
      return r.Error(*n, "channel.edges", "must be an array of [src, dst] pairs");
    }
    for (const toml::node& e : *edges) {
      const toml::array* pair = e.as_array();
      if (!pair || pair->size() != 2 || !pair->get(0)->is_string() || !pair->get(1)->is_string()) {
        return r.Error(e, "channel.edges", "each edge must be [\"src\", \"dst\"]");
      }
      c.edges.emplace_back(*pair->get(0)->value<std::string>(),
                           *pair->get(1)->value<std::string>());
    }
  }
  return c;
}

// Every node's line under its indexed path (memory[1].pool, channel[0].edges[2]).
void RecordLines(const toml::node& n, const std::string& path, std::map<std::string, int>& lines) {
  if (!path.empty() && n.source().begin.line > 0) {
    lines[path] = static_cast<int>(n.source().begin.line);
  }
  if (const toml::table* t = n.as_table()) {
    for (const auto& [k, v] : *t) {
      RecordLines(v, path.empty() ? std::string(k.str()) : StrCat(path, ".", k.str()), lines);
    }
  } else if (const toml::array* a = n.as_array()) {
    for (size_t i = 0; i < a->size(); ++i) {
      RecordLines(*a->get(i), StrCat(path, "[", i, "]"), lines);
    }
  }
}

}  // namespace

Result<uint64_t> ParseByteSize(std::string_view text) {
  const std::string s = AsciiLower(TrimAscii(text));
  size_t i = 0;
  while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) {
    ++i;
  }
  const std::optional<double> parsed = ParseNumber<double>(std::string_view(s).substr(0, i));
  if (i == 0 || !parsed) {
    return InvalidArgument("'", text, "' is not a size (examples: 4096, 64KiB, 32MiB, 1GiB)");
  }
  const double number = *parsed;
  const std::string unit(TrimAscii(std::string_view(s).substr(i)));
  double scale = 0;
  if (unit.empty() || unit == "b") {
    scale = 1;
  } else if (unit == "kib" || unit == "k") {
    scale = 1024.0;
  } else if (unit == "mib" || unit == "m") {
    scale = 1024.0 * 1024;
  } else if (unit == "gib" || unit == "g") {
    scale = 1024.0 * 1024 * 1024;
  } else if (unit == "tib" || unit == "t") {
    scale = 1024.0 * 1024 * 1024 * 1024;
  } else if (unit == "kb") {
    scale = 1e3;
  } else if (unit == "mb") {
    scale = 1e6;
  } else if (unit == "gb") {
    scale = 1e9;
  } else if (unit == "tb") {
    scale = 1e12;
  } else {
    return InvalidArgument("'", text, "' has unknown unit '", unit,
                           "' (use KiB, MiB, GiB, KB, MB, GB)");
  }
  const double bytes = number * scale;
  if (!(bytes >= 0) || bytes > 9.0e18) {
    return OutOfRange("'", text, "' is too large");
  }
  return static_cast<uint64_t>(std::llround(bytes));
}

Result<RuntimeConfig> ParseRuntimeConfig(std::string_view toml_text, std::string_view source) {
  ISO_ASSIGN_OR_RETURN(Config c, ParseConfig(toml_text, source));
  return c.runtime;
}

Result<Config> ParseConfig(std::string_view toml_text, std::string_view source) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    return InvalidArgument(source, ":", e.source().begin.line, ": ", e.description());
  }
  Reader r(source);
  ISO_RETURN_IF_ERROR(r.OnlyKeys(root, "",
                                 {"daemon", "runtime", "memory", "channel", "cluster", "peer",
                                  "metrics", "rdma", "gpu", "qos"}));
  Config config;
  RuntimeConfig& c = config.runtime;
  if (const toml::node* n = root.get("runtime")) {
    const toml::table* t = n->as_table();
    if (!t) {
      return r.Error(*n, "runtime", "must be a table");
    }
    ISO_RETURN_IF_ERROR(ReadRuntime(r, *t, c));
  }
  if (const toml::node* n = root.get("daemon")) {
    const toml::table* t = n->as_table();
    if (!t) {
      return r.Error(*n, "daemon", "must be a table");
    }
    ISO_RETURN_IF_ERROR(ReadDaemon(r, *t, config.daemon));
  }
  if (const toml::node* n = root.get("cluster")) {
    const toml::table* t = n->as_table();
    if (!t) {
      return r.Error(*n, "cluster", "must be a table");
    }
    ISO_RETURN_IF_ERROR(ReadCluster(r, *t, config.cluster));
  }
  if (const toml::node* n = root.get("metrics")) {
    const toml::table* t = n->as_table();
    if (!t) {
      return r.Error(*n, "metrics", "must be a table");
    }
    ISO_RETURN_IF_ERROR(ReadMetrics(r, *t, config.metrics));
  }
  if (const toml::node* n = root.get("rdma")) {
    ISO_RETURN_IF_ERROR(ReadRdma(*n, r.source(), config.rdma));
  }
  if (const toml::node* n = root.get("gpu")) {
    ISO_RETURN_IF_ERROR(ReadGpu(*n, r.source(), config.gpu));
  }
  if (const toml::node* n = root.get("qos")) {
    ISO_RETURN_IF_ERROR(ReadQos(*n, r.source(), config.qos));
  }
  auto read_list = [&](const char* key, auto read_one, auto& out) -> Status {
    const toml::node* n = root.get(key);
    if (!n) {
      return OkStatus();
    }
    const toml::array* arr = n->as_array();
    if (!arr) {
      return r.Error(*n, key, StrCat("must be written as [[", key, "]] tables"));
    }
    for (const toml::node& e : *arr) {
      const toml::table* t = e.as_table();
      if (!t) {
        return r.Error(e, key, StrCat("must be written as [[", key, "]] tables"));
      }
      auto item = read_one(r, *t);
      if (!item.ok()) {
        return item.status();
      }
      out.push_back(*std::move(item));
    }
    return OkStatus();
  };
  ISO_RETURN_IF_ERROR(read_list("memory", ReadMemory, c.memories));
  ISO_RETURN_IF_ERROR(read_list("channel", ReadChannel, c.channels));
  ISO_RETURN_IF_ERROR(read_list("peer", ReadPeer, config.cluster.peers));
  // The cross-field checks name keys; the lines recorded here turn those
  // into FILE:LINE.
  config.origin.source = std::string(source);
  RecordLines(root, "", config.origin.lines);
  ISO_RETURN_IF_ERROR(config.origin.Locate(config.Validate()));
  return config;
}

Result<Config> LoadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return NotFound("config file '", path, "' cannot be opened");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseConfig(ss.str(), path);
}

}  // namespace isometry
