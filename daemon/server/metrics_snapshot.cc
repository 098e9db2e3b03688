#include "daemon/server/metrics_snapshot.h"

#include <sys/statvfs.h>

#include <algorithm>

#include "core/channel_kind.h"
#include "core/memory.h"
#include "daemon/node/introspection.h"
#include "daemon/node/traffic_classes.h"
#include "daemon/server/attach_stream.h"
#include "daemon/server/metrics_process.h"

namespace isometry {

namespace {

void CopyStatus(const NodeStatus& st, MetricsSnapshot& s) {
  const RuntimeStats& r = st.runtime;
  s.sessions = st.sessions;
  s.transfers_waiting = r.transfers_waiting;
  s.transfers_running = r.transfers_running;
  s.transfers_active = st.transfers_active;
  s.transfers_submitted = r.transfers_submitted;
  s.transfers_done = r.transfers_completed;
  s.transfers_failed = r.transfers_failed;
  s.transfers_cancelled = r.transfers_cancelled;
  s.transfers_inline = r.transfers_inline;
  s.attach_events_dropped = AttachEventsDropped();
  s.ring_requests_streamed = r.ring_requests_streamed;
  s.ring_epochs_timed = r.ring_epochs_timed;
  s.ring_store_switches = r.ring_store_switches;
  s.transfers_waited = r.transfers_waiting_for_buffers;
  s.program_cache_hits = r.program_cache_hits;
  s.program_cache_misses = r.program_cache_misses;
  s.program_cache_bytes = r.program_cache_bytes;
  s.program_cache_entries = r.program_cache_entries;
  s.plan_cache_entries = r.plan_cache_entries;
  s.plan_cache_bytes = r.plan_cache_bytes;
  s.plan_cache_hits = r.plan_cache_hits_since_start;
  s.plan_cache_misses = r.plan_cache_misses_since_start;
  s.plans_simple = r.plans_simple_since_start;
  s.plans_full = r.plans_full_since_start;
  s.own_hop_windows = st.own_hops.windows;
  s.own_hop_runs = st.own_hops.runs;
  s.own_hop_fallbacks = st.own_hops.fallbacks;
  s.own_hop_bogus = st.own_hops.bogus;
  s.own_hop_timeouts = st.own_hops.timeouts;
  s.own_hop_not_lent = st.own_hops.not_lent;
  s.direct_read_leases = st.direct_reads.leases;
  s.direct_read_revoked = st.direct_reads.revoked;
  s.direct_read_refused = st.direct_reads.refused;
  const EndedTransfers& e = st.ended;
  for (size_t i = 0; i < e.duration.size() && i < TransferMetrics::kSizeClasses.size(); ++i) {
    s.ended.duration.emplace_back(std::string(TransferMetrics::kSizeClasses[i]), e.duration[i]);
  }
  for (const auto& [code, n] : e.failed) {
    s.ended.failed_by_code.emplace_back(absl::StatusCodeToString(code), n);
  }
  s.ended.bytes_by_uid.assign(e.bytes_by_uid.begin(), e.bytes_by_uid.end());
}

// Every priority the channel has seen (its queue waits' list), queued XDs
// or not, so a series does not vanish at 0; highest first.
std::vector<std::pair<int, int>> QueuedByPriority(const ChannelStats& c) {
  std::vector<std::pair<int, int>> out;
  for (const auto& [priority, wait] : c.queue_wait) out.emplace_back(priority, 0);
  for (const auto& [priority, xds] : c.queued_by_priority) {
    auto at = std::find_if(out.begin(), out.end(),
                           [p = priority](const auto& e) { return e.first == p; });
    // Admission made every queued priority known: by name, or past the
    // bound as "other", the last entry.
    if (at == out.end() && !out.empty() && out.back().first == kOtherPriorities) {
      at = out.end() - 1;
    }
    if (at == out.end()) {
      at = out.insert(std::upper_bound(out.begin(), out.end(), priority,
                                       [](int p, const auto& e) { return p > e.first; }),
                      {priority, 0});
    }
    at->second += xds;
  }
  return out;
}

}  // namespace

MetricsSnapshot TakeMetricsSnapshot(const Node& node, const MetricsPeersProvider& peers) {
  MetricsSnapshot s;
  s.version = ISOMETRY_VERSION;
  s.process = ReadProcessMetrics();
  CopyStatus(node.introspection().GetStatus(), s);
  for (const ChannelReport& c : node.introspection().ListChannels()) {
    ChannelMetrics m;
    m.name = c.stats.name;
    m.kind = std::string(ChannelKindName(c.config.kind));
    m.bytes = c.stats.bytes_done;
    m.requests = c.stats.requests_done;
    m.errors = c.stats.errors;
    m.in_flight = c.stats.requests_in_flight;
    m.max_in_flight = c.stats.threads_or_slots;
    m.queued_by_priority = QueuedByPriority(c.stats);
    m.queue_wait = c.stats.queue_wait;
    s.channels.push_back(std::move(m));
  }
  for (const QosClassReport& c : node.traffic_classes().Report(SessionRef(), false).classes) {
    QosMetrics q;
    q.name = c.stats.name;
    q.weight = c.stats.weight;
    q.clamped = c.clamped;
    q.queue_wait = c.stats.queue_wait;
    for (const QosChannelStats& ch : c.stats.channels) {
      q.channels.push_back({ch.channel, ch.bytes, ch.throttled_s});
    }
    s.qos.push_back(std::move(q));
  }
  for (const MemoryReport& r : node.introspection().ListMemories()) {
    MemoryMetrics m;
    m.name = r.usage.name;
    m.kind = std::string(MemoryKindName(r.usage.kind));
    m.pool_capacity = r.pool_capacity;
    m.pool_used = r.pool_used;
    m.staging_budget = r.usage.staging_budget;
    m.staging_used = r.usage.staging_used;
    m.staging_peak = r.usage.staging_peak;
    m.staging_cached = r.usage.staging_cached;
    if (r.usage.kind == MemoryKind::kDsk) {
      for (const MemoryConfig& c : node.config().runtime.memories) {
        if (c.name != m.name) continue;
        m.disk_quota = c.quota_bytes;
        struct statvfs fs {};
        if (statvfs(c.directory.c_str(), &fs) == 0) {
          m.disk_size_avail.emplace(uint64_t{fs.f_blocks} * fs.f_frsize,
                                    uint64_t{fs.f_bavail} * fs.f_frsize);
        }
      }
    }
    s.memories.push_back(std::move(m));
  }
  if (peers) {
    s.has_peers = true;
    const v1::ListPeersResponse list = peers();
    for (const v1::PeerInfo& p : list.peers()) {
      s.peers.push_back({p.name(), p.state(), p.rtt_ms() / 1000.0, p.bytes_sent(),
                         p.bytes_received(), p.resumes(), p.express_bytes_sent(),
                         p.readers_lifted(), p.eager_puts_declined()});
    }
  }
  return s;
}

}  // namespace isometry
