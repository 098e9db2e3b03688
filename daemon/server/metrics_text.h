// The Prometheus text exposition (format 0.0.4) of a node's numbers.
//
// MetricsSnapshot is a plain copy of what the daemon counts, taken in one
// go (daemon/server/metrics_snapshot.h); RenderMetrics turns it into the
// page GET /metrics answers. Rendering is a pure function of the snapshot,
// so the names, types and escaping are tested without a daemon.
//
// What goes in: counts, sizes, rates, and the names an operator wrote in
// the config (memories, channels, peers) or that are fixed (states,
// kinds). Never a session token, a client's name, a file path or a secret
// (a client's uid, a number, labels its bytes). Every name starts with
// `isometry_` but the standard `process_*` ones; counters end in `_total`
// and never decrease while the daemon runs. A family's series stay while
// they are zero: every channel, memory and priority once seen has its
// series, so an alert on a rate or an absence does not flap.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/histogram.h"

namespace isometry {

struct ChannelMetrics {
  std::string name;  // as configured ("memcpy0", "tcp:node-b")
  std::string kind;  // "memcpy", "disk_read", ...
  uint64_t bytes = 0;
  uint64_t requests = 0;
  uint64_t errors = 0;  // failed requests; cancellations are not errors
  int in_flight = 0;
  int max_in_flight = 0;
  // (priority, XDs) for every priority the channel has seen, highest
  // first; 0 where none is queued now.
  std::vector<std::pair<int, int>> queued_by_priority;
  // Seconds from an XD's first chunk being ready to its dispatch, per
  // priority (kOtherPriorities: "other").
  std::vector<std::pair<int, HistogramCounts>> queue_wait;
};

struct MemoryMetrics {
  std::string name;
  std::string kind;            // "SYS", "DSK", ...
  uint64_t pool_capacity = 0;  // client pool; 0: none (no pool series)
  uint64_t pool_used = 0;
  uint64_t staging_budget = 0;
  uint64_t staging_used = 0;
  uint64_t staging_peak = 0;
  uint64_t staging_cached = 0;
  // DSK memories: the file system under the directory (statvfs; absent
  // where it cannot be read) and memory.quota_bytes, per client uid.
  std::optional<std::pair<uint64_t, uint64_t>> disk_size_avail;
  uint64_t disk_quota = 0;
};

struct PeerMetrics {
  std::string name;
  std::string state;  // connecting, up, down, refused
  double rtt_seconds = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t resumes = 0;              // broken data-link sets resumed (or tried)
  uint64_t express_bytes_sent = 0;   // of bytes_sent, over the express connection
  uint64_t readers_lifted = 0;       // starved readers of a class's chunks lifted to nice 0
  uint64_t eager_puts_declined = 0;  // eager puts the peer declined (its caps)
};

// The standard process_* families, from /proc/self (metrics_process.h).
struct ProcessMetrics {
  double start_time_s = 0;  // since the Unix epoch
  double cpu_s = 0;         // user + system
  uint64_t resident_bytes = 0;
  uint64_t virtual_bytes = 0;
  uint64_t open_fds = 0;
  uint64_t max_fds = 0;  // RLIMIT_NOFILE's soft limit
};

// Client copies as they ended (daemon/node/transfer_metrics.h).
struct EndedMetrics {
  // Duration of the done ones by size class: (label, histogram).
  std::vector<std::pair<std::string, HistogramCounts>> duration;
  std::vector<std::pair<std::string, uint64_t>> failed_by_code;  // ("NOT_FOUND", n)
  std::vector<std::pair<int64_t, uint64_t>> bytes_by_uid;        // -1: not known; -2: other
};

// One traffic class (docs/guides/qos.md) on one channel.
struct QosChannelMetrics {
  std::string channel;
  uint64_t bytes = 0;
  double throttled_s = 0;
};
struct QosMetrics {
  std::string name;
  uint32_t weight = 1;
  uint64_t clamped = 0;  // copies whose priority the class's ceiling lowered
  std::vector<QosChannelMetrics> channels;
  HistogramCounts queue_wait;
};

struct MetricsSnapshot {
  std::string version;
  std::optional<ProcessMetrics> process;  // none: /proc could not be read
  uint64_t sessions = 0;
  // Transfers of the runtime: now ...
  uint64_t transfers_waiting = 0;  // for staging buffers
  uint64_t transfers_running = 0;
  uint64_t transfers_active = 0;  // client copies in flight (cross-node ones included)
  // ... and since start.
  uint64_t transfers_submitted = 0;
  uint64_t transfers_done = 0;
  uint64_t transfers_failed = 0;
  uint64_t transfers_cancelled = 0;
  uint64_t transfers_inline = 0;
  uint64_t ring_requests_streamed = 0;
  uint64_t ring_epochs_timed = 0;
  uint64_t ring_store_switches = 0;
  uint64_t transfers_waited = 0;  // that had to wait for staging buffers
  // Completion events not sent to gRPC clients that did not read their
  // Attach stream (daemon/server/attach_stream.h).
  uint64_t attach_events_dropped = 0;
  uint64_t program_cache_hits = 0;
  uint64_t program_cache_misses = 0;
  uint64_t program_cache_bytes = 0;
  uint64_t program_cache_entries = 0;
  uint64_t plan_cache_hits = 0;
  uint64_t plan_cache_misses = 0;
  uint64_t plan_cache_entries = 0;
  uint64_t plan_cache_bytes = 0;
  uint64_t plans_simple = 0;
  uint64_t plans_full = 0;
  // Hop windows (NodeStatus::own_hops).
  uint64_t own_hop_windows = 0;
  uint64_t own_hop_runs = 0;
  uint64_t own_hop_fallbacks = 0;
  uint64_t own_hop_bogus = 0;
  uint64_t own_hop_timeouts = 0;
  uint64_t own_hop_not_lent = 0;
  // Direct read leases (NodeStatus::direct_reads).
  uint64_t direct_read_leases = 0;
  uint64_t direct_read_revoked = 0;
  uint64_t direct_read_refused = 0;
  EndedMetrics ended;
  std::vector<ChannelMetrics> channels;
  std::vector<QosMetrics> qos;
  std::vector<MemoryMetrics> memories;
  bool has_peers = false;  // peer series only on nodes with [[peer]]
  std::vector<PeerMetrics> peers;
};

// A label value as the format wants it: backslash, double quote and line
// feed escaped (\\, \", \n); every other byte as is.
std::string EscapeLabelValue(std::string_view value);

// The whole page: one `# HELP` and one `# TYPE` line before each family's
// samples, families in a fixed order, one sample per line.
std::string RenderMetrics(const MetricsSnapshot& s);

// The Content-Type of that page.
inline constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace isometry
