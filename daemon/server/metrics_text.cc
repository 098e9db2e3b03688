#include "daemon/server/metrics_text.h"

#include <charconv>
#include <cmath>
#include <initializer_list>

namespace isometry {

namespace {

struct Label {
  std::string_view name;
  std::string_view value;
};

// Appends families to the page; each sample's name is the family's name,
// or for a histogram the family's name plus _bucket, _sum or _count.
class Page {
 public:
  void Family(std::string_view name, std::string_view type, std::string_view help) {
    out_.append("# HELP ").append(name).append(" ");
    for (char c : help) {
      if (c == '\\') {
        out_.append("\\\\");
      } else if (c == '\n') {
        out_.append("\\n");
      } else {
        out_.push_back(c);
      }
    }
    out_.append("\n# TYPE ").append(name).append(" ").append(type).append("\n");
    name_ = name;
  }

  void Sample(std::initializer_list<Label> labels, uint64_t value) {
    Head({}, labels, nullptr);
    out_.append(std::to_string(value)).push_back('\n');
  }
  void Sample(std::initializer_list<Label> labels, double value) {
    Head({}, labels, nullptr);
    AppendDouble(value);
    out_.push_back('\n');
  }

  // A histogram's series for one label set: a cumulative _bucket per
  // bound, then +Inf (equal to _count), _sum and _count.
  void Histogram(std::initializer_list<Label> labels, const HistogramCounts& h) {
    std::string le;
    for (size_t i = 0; i <= h.bounds.size(); ++i) {
      le.clear();
      if (i < h.bounds.size()) {
        char buf[32];
        le.append(buf, std::to_chars(buf, buf + sizeof(buf), h.bounds[i]).ptr);
      } else {
        le = "+Inf";
      }
      const Label bound{"le", le};
      Head("_bucket", labels, &bound);
      out_.append(std::to_string(i < h.cumulative.size() ? h.cumulative[i] : h.count))
          .push_back('\n');
    }
    Head("_sum", labels, nullptr);
    AppendDouble(h.sum);
    out_.push_back('\n');
    Head("_count", labels, nullptr);
    out_.append(std::to_string(h.count)).push_back('\n');
  }

  std::string Take() { return std::move(out_); }

 private:
  void Head(std::string_view suffix, std::initializer_list<Label> labels, const Label* extra) {
    out_.append(name_).append(suffix);
    if (labels.size() > 0 || extra) {
      out_.push_back('{');
      bool first = true;
      auto append = [&](const Label& l) {
        if (!first) out_.push_back(',');
        first = false;
        out_.append(l.name).append("=\"").append(EscapeLabelValue(l.value)).push_back('"');
      };
      for (const Label& l : labels) append(l);
      if (extra) append(*extra);
      out_.push_back('}');
    }
    out_.push_back(' ');
  }

  void AppendDouble(double v) {
    if (std::isnan(v)) {
      out_.append("NaN");
    } else if (std::isinf(v)) {
      out_.append(v > 0 ? "+Inf" : "-Inf");
    } else {
      char buf[64];
      const auto r = std::to_chars(buf, buf + sizeof(buf), v);
      out_.append(buf, r.ptr);
    }
  }

  std::string out_;
  std::string_view name_;
};

// The standard families every Prometheus client library serves, so the
// usual dashboards and alerts (a restart: process_start_time_seconds
// changed) work unchanged.
void RenderProcess(const ProcessMetrics& m, Page& p) {
  p.Family("process_cpu_seconds_total", "counter", "User and system CPU time spent in seconds.");
  p.Sample({}, m.cpu_s);
  p.Family("process_open_fds", "gauge", "Number of open file descriptors.");
  p.Sample({}, m.open_fds);
  p.Family("process_max_fds", "gauge", "Maximum number of open file descriptors.");
  p.Sample({}, m.max_fds);
  p.Family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
  p.Sample({}, m.virtual_bytes);
  p.Family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
  p.Sample({}, m.resident_bytes);
  p.Family("process_start_time_seconds", "gauge",
           "Start time of the process since unix epoch in seconds.");
  p.Sample({}, m.start_time_s);
}

void RenderEnded(const EndedMetrics& e, Page& p) {
  p.Family("isometry_transfer_duration_seconds", "histogram",
           "Client copies that ended done: seconds from submission to the end, by size class.");
  for (const auto& [size_class, h] : e.duration) p.Histogram({{"size_class", size_class}}, h);
  p.Family("isometry_transfers_failed_total", "counter",
           "Client copies that failed, by status code (cancelled ones are not failures).");
  for (const auto& [code, n] : e.failed_by_code) p.Sample({{"code", code}}, n);
  p.Family("isometry_client_bytes_total", "counter",
           "Bytes of the client copies that ended done, by the client's uid (-1: not known, a "
           "gRPC client; other: uids past the first 256).");
  for (const auto& [uid, bytes] : e.bytes_by_uid) {
    p.Sample({{"uid", uid == -2 ? std::string("other") : std::to_string(uid)}}, bytes);
  }
}

void RenderTransfers(const MetricsSnapshot& s, Page& p) {
  p.Family("isometry_transfers", "gauge",
           "Transfers of this node's runtime now, by state (waiting: for staging buffers).");
  p.Sample({{"state", "waiting"}}, s.transfers_waiting);
  p.Sample({{"state", "running"}}, s.transfers_running);
  p.Family("isometry_transfers_active", "gauge",
           "Client copies in flight, cross-node ones included.");
  p.Sample({}, s.transfers_active);
  p.Family("isometry_transfers_submitted_total", "counter", "Transfers accepted by the runtime.");
  p.Sample({}, s.transfers_submitted);
  p.Family("isometry_transfers_finished_total", "counter", "Transfers that ended, by outcome.");
  p.Sample({{"state", "done"}}, s.transfers_done);
  p.Sample({{"state", "failed"}}, s.transfers_failed);
  p.Sample({{"state", "cancelled"}}, s.transfers_cancelled);
  p.Family("isometry_transfers_inline_total", "counter",
           "Small direct copies run on the submitting thread.");
  p.Sample({}, s.transfers_inline);
  p.Family("isometry_attach_events_dropped_total", "counter",
           "Completion events dropped for gRPC clients that did not read their Attach stream "
           "(daemon.max_attach_backlog_bytes); each such client is told how many.");
  p.Sample({}, s.attach_events_dropped);
  p.Family("isometry_ring_requests_streamed_total", "counter",
           "Requests that wrote an intermediate ring with streaming stores (the way that has "
           "been faster on this node, or one epoch in 16 trying it).");
  p.Sample({}, s.ring_requests_streamed);
  p.Family("isometry_ring_epochs_timed_total", "counter",
           "Epochs of a ring between two memcpy hops timed from end to end, to weigh cached "
           "against streaming stores.");
  p.Sample({}, s.ring_epochs_timed);
  p.Family("isometry_ring_store_switches_total", "counter",
           "Times the faster way of writing rings (cached or streaming stores) changed.");
  p.Sample({}, s.ring_store_switches);
  p.Family("isometry_transfers_waited_for_buffers_total", "counter",
           "Transfers that had to wait for staging buffers before running.");
  p.Sample({}, s.transfers_waited);
  p.Family("isometry_own_hop_windows", "gauge",
           "Hop windows open: sessions whose client runs its own hops.");
  p.Sample({}, s.own_hop_windows);
  p.Family("isometry_own_hops_total", "counter",
           "Hops handed to clients' windows, by outcome (ran; left to CMA; timed out; bogus "
           "answers; buffers not lent a window).");
  p.Sample({{"result", "ran"}}, s.own_hop_runs);
  p.Sample({{"result", "left_to_cma"}}, s.own_hop_fallbacks);
  p.Sample({{"result", "timed_out"}}, s.own_hop_timeouts);
  p.Sample({{"result", "bogus"}}, s.own_hop_bogus);
  p.Sample({{"result", "not_lent"}}, s.own_hop_not_lent);
  p.Family("isometry_direct_read_leases_total", "counter",
           "Direct read leases, by outcome (granted; revoked: their source range ended; "
           "refused: the copy went through the daemon).");
  p.Sample({{"result", "granted"}}, s.direct_read_leases);
  p.Sample({{"result", "revoked"}}, s.direct_read_revoked);
  p.Sample({{"result", "refused"}}, s.direct_read_refused);
}

std::string PriorityLabel(int priority) {
  return priority == kOtherPriorities ? "other" : std::to_string(priority);
}

void RenderChannels(const MetricsSnapshot& s, Page& p) {
  struct Counter {
    const char* name;
    const char* help;
    uint64_t ChannelMetrics::*field;
  };
  for (const Counter& c : {
           Counter{"isometry_channel_bytes_total", "Bytes moved by the channel.",
                   &ChannelMetrics::bytes},
           Counter{"isometry_channel_requests_total", "Requests the channel completed.",
                   &ChannelMetrics::requests},
           Counter{"isometry_channel_errors_total",
                   "Requests that failed on the channel (cancellations aside).",
                   &ChannelMetrics::errors},
       }) {
    p.Family(c.name, "counter", c.help);
    for (const ChannelMetrics& ch : s.channels) {
      p.Sample({{"channel", ch.name}, {"kind", ch.kind}}, ch.*c.field);
    }
  }
  p.Family("isometry_channel_requests_in_flight", "gauge", "Requests on the channel now.");
  for (const ChannelMetrics& ch : s.channels) {
    p.Sample({{"channel", ch.name}, {"kind", ch.kind}}, static_cast<uint64_t>(ch.in_flight));
  }
  p.Family("isometry_channel_max_in_flight", "gauge", "Requests the channel may have at once.");
  for (const ChannelMetrics& ch : s.channels) {
    p.Sample({{"channel", ch.name}, {"kind", ch.kind}}, static_cast<uint64_t>(ch.max_in_flight));
  }
  p.Family("isometry_channel_queued_xds", "gauge",
           "Unfinished XDs in the channel's pool, by priority (every priority seen; 0: none "
           "queued).");
  for (const ChannelMetrics& ch : s.channels) {
    for (const auto& [priority, xds] : ch.queued_by_priority) {
      p.Sample({{"channel", ch.name}, {"kind", ch.kind}, {"priority", PriorityLabel(priority)}},
               static_cast<uint64_t>(xds));
    }
  }
  p.Family("isometry_channel_queue_wait_seconds", "histogram",
           "Seconds from an XD's first chunk being ready to its dispatch on the channel, by "
           "priority.");
  for (const ChannelMetrics& ch : s.channels) {
    for (const auto& [priority, h] : ch.queue_wait) {
      p.Histogram({{"channel", ch.name}, {"kind", ch.kind}, {"priority", PriorityLabel(priority)}},
                  h);
    }
  }
}

void RenderQos(const MetricsSnapshot& s, Page& p) {
  p.Family("isometry_qos_weight", "gauge", "The traffic class's weight.");
  for (const QosMetrics& q : s.qos) p.Sample({{"class", q.name}}, uint64_t{q.weight});
  p.Family("isometry_qos_bytes_total", "counter",
           "Bytes the channel dispatched for the traffic class.");
  for (const QosMetrics& q : s.qos) {
    for (const QosChannelMetrics& c : q.channels) {
      p.Sample({{"class", q.name}, {"channel", c.channel}}, c.bytes);
    }
  }
  p.Family("isometry_qos_throttled_seconds_total", "counter",
           "Seconds the traffic class had work on the channel but a cap held it back.");
  for (const QosMetrics& q : s.qos) {
    for (const QosChannelMetrics& c : q.channels) {
      p.Sample({{"class", q.name}, {"channel", c.channel}}, c.throttled_s);
    }
  }
  p.Family("isometry_qos_clamped_total", "counter",
           "Copies whose priority the traffic class's max_priority lowered.");
  for (const QosMetrics& q : s.qos) p.Sample({{"class", q.name}}, q.clamped);
  p.Family("isometry_qos_queue_wait_seconds", "histogram",
           "Seconds from an XD's first chunk being ready to its dispatch, by traffic class.");
  for (const QosMetrics& q : s.qos) p.Histogram({{"class", q.name}}, q.queue_wait);
}

void RenderMemories(const MetricsSnapshot& s, Page& p) {
  struct Gauge {
    const char* name;
    const char* help;
    uint64_t MemoryMetrics::*field;
    bool pool;  // only memories with a client pool
  };
  for (const Gauge& g : {
           Gauge{"isometry_pool_capacity_bytes", "Size of the memory's client pool.",
                 &MemoryMetrics::pool_capacity, true},
           Gauge{"isometry_pool_used_bytes", "Client pool bytes allocated now.",
                 &MemoryMetrics::pool_used, true},
           Gauge{"isometry_staging_budget_bytes",
                 "Staging budget of the memory (intermediate buffers).",
                 &MemoryMetrics::staging_budget, false},
           Gauge{"isometry_staging_used_bytes", "Staging bytes held by transfers now.",
                 &MemoryMetrics::staging_used, false},
           Gauge{"isometry_staging_peak_bytes", "Most staging bytes ever held at once.",
                 &MemoryMetrics::staging_peak, false},
           Gauge{"isometry_staging_cached_bytes",
                 "Staging bytes given back and kept mapped for reuse (within the budget).",
                 &MemoryMetrics::staging_cached, false},
       }) {
    p.Family(g.name, "gauge", g.help);
    for (const MemoryMetrics& m : s.memories) {
      if (g.pool && m.pool_capacity == 0) continue;
      p.Sample({{"memory", m.name}, {"kind", m.kind}}, m.*g.field);
    }
  }
}

// DSK memories: how full their file system is (a file copy fails with
// ENOSPC long before any quota when it is shared), and the quota.
void RenderDisks(const MetricsSnapshot& s, Page& p) {
  p.Family("isometry_disk_size_bytes", "gauge",
           "Size of the file system under a DSK memory's directory.");
  for (const MemoryMetrics& m : s.memories) {
    if (m.disk_size_avail) p.Sample({{"memory", m.name}}, m.disk_size_avail->first);
  }
  p.Family("isometry_disk_avail_bytes", "gauge",
           "Bytes of that file system free to the daemon's user.");
  for (const MemoryMetrics& m : s.memories) {
    if (m.disk_size_avail) p.Sample({{"memory", m.name}}, m.disk_size_avail->second);
  }
  p.Family("isometry_disk_quota_bytes", "gauge",
           "memory.quota_bytes of a DSK memory: what one client uid's copies may write at once.");
  for (const MemoryMetrics& m : s.memories) {
    if (m.kind == "DSK") p.Sample({{"memory", m.name}}, m.disk_quota);
  }
}

void RenderCaches(const MetricsSnapshot& s, Page& p) {
  p.Family("isometry_program_cache_hits_total", "counter", "Copy programs found in the cache.");
  p.Sample({}, s.program_cache_hits);
  p.Family("isometry_program_cache_misses_total", "counter", "Copy programs compiled anew.");
  p.Sample({}, s.program_cache_misses);
  p.Family("isometry_program_cache_bytes", "gauge", "Bytes held by the cached copy programs.");
  p.Sample({}, s.program_cache_bytes);
  p.Family("isometry_program_cache_entries", "gauge", "Copy programs kept in the cache.");
  p.Sample({}, s.program_cache_entries);
  p.Family("isometry_plan_cache_hits_total", "counter", "Paths found in the plan cache.");
  p.Sample({}, s.plan_cache_hits);
  p.Family("isometry_plan_cache_misses_total", "counter", "Paths the planner had to search.");
  p.Sample({}, s.plan_cache_misses);
  p.Family("isometry_plan_cache_entries", "gauge", "Paths kept in the plan cache.");
  p.Sample({}, s.plan_cache_entries);
  p.Family("isometry_plan_cache_bytes", "gauge",
           "Bytes held by the plan cache's paths and keys (estimate).");
  p.Sample({}, s.plan_cache_bytes);
  p.Family("isometry_plans_total", "counter", "Paths planned, by algorithm.");
  p.Sample({{"algorithm", "simple"}}, s.plans_simple);
  p.Sample({{"algorithm", "full"}}, s.plans_full);
}

void RenderPeers(const MetricsSnapshot& s, Page& p) {
  static constexpr std::string_view kStates[] = {"connecting", "up", "down", "refused"};
  p.Family("isometry_peer_state", "gauge", "1 for the peer's current state, 0 for the others.");
  for (const PeerMetrics& peer : s.peers) {
    bool known = false;
    for (std::string_view st : kStates) {
      known |= peer.state == st;
      p.Sample({{"peer", peer.name}, {"state", st}}, uint64_t{peer.state == st ? 1u : 0u});
    }
    if (!known) p.Sample({{"peer", peer.name}, {"state", peer.state}}, uint64_t{1});
  }
  p.Family("isometry_peer_up", "gauge", "1 while the peer is up.");
  for (const PeerMetrics& peer : s.peers) {
    p.Sample({{"peer", peer.name}}, uint64_t{peer.state == "up" ? 1u : 0u});
  }
  p.Family("isometry_peer_rtt_seconds", "gauge", "Last keepalive round trip to the peer.");
  for (const PeerMetrics& peer : s.peers) p.Sample({{"peer", peer.name}}, peer.rtt_seconds);
  p.Family("isometry_peer_sent_bytes_total", "counter", "Bytes sent to the peer on data links.");
  for (const PeerMetrics& peer : s.peers) p.Sample({{"peer", peer.name}}, peer.bytes_sent);
  p.Family("isometry_peer_express_sent_bytes_total", "counter",
           "Of the bytes sent to the peer, those of small chunks, over the express connection.");
  for (const PeerMetrics& peer : s.peers) p.Sample({{"peer", peer.name}}, peer.express_bytes_sent);
  p.Family("isometry_peer_received_bytes_total", "counter",
           "Bytes received from the peer on data links.");
  for (const PeerMetrics& peer : s.peers) p.Sample({{"peer", peer.name}}, peer.bytes_received);
  p.Family("isometry_peer_resumes_total", "counter",
           "Times this node's data links with the peer broke and were resumed (or tried to be).");
  for (const PeerMetrics& peer : s.peers) p.Sample({{"peer", peer.name}}, peer.resumes);
  p.Family("isometry_peer_readers_lifted_total", "counter",
           "Readers of the peer's chunks for a class with a nice value that got no CPU for a "
           "quarter of the peer timeout and went on at the daemon's own value.");
  for (const PeerMetrics& peer : s.peers) p.Sample({{"peer", peer.name}}, peer.readers_lifted);
  p.Family("isometry_peer_eager_puts_declined_total", "counter",
           "Eager puts sent to the peer that it declined, as it caps or pauses their class.");
  for (const PeerMetrics& peer : s.peers) {
    p.Sample({{"peer", peer.name}}, peer.eager_puts_declined);
  }
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out.append("\\\\");
    } else if (c == '"') {
      out.append("\\\"");
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string RenderMetrics(const MetricsSnapshot& s) {
  Page p;
  p.Family("isometry_build_info", "gauge", "Always 1; the daemon's version as a label.");
  p.Sample({{"version", s.version}}, uint64_t{1});
  if (s.process) RenderProcess(*s.process, p);
  p.Family("isometry_sessions", "gauge", "Client sessions open now.");
  p.Sample({}, s.sessions);
  RenderTransfers(s, p);
  RenderEnded(s.ended, p);
  RenderChannels(s, p);
  RenderQos(s, p);
  RenderMemories(s, p);
  RenderDisks(s, p);
  RenderCaches(s, p);
  if (s.has_peers) RenderPeers(s, p);
  return p.Take();
}

}  // namespace isometry
