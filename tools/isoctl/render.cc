#include "tools/isoctl/render.h"

#include <absl/status/status.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/log_escape.h"
#include "tools/isoctl/format.h"

namespace isometry::isoctl {

namespace {

using Align = Table::Align;

std::string CodeName(int32_t code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

// "p5:3 p0:12", highest priority first; "-" when nothing waits.
std::string Queued(const v1::ChannelInfo& c) {
  std::vector<std::pair<int32_t, int32_t>> levels;
  for (const v1::QueueLevel& q : c.queued()) {
    if (q.xds() > 0) {
      levels.emplace_back(q.priority(), q.xds());
    }
  }
  if (levels.empty()) {
    return "-";
  }
  std::sort(levels.begin(), levels.end(), [](auto a, auto b) { return a.first > b.first; });
  std::string out;
  for (const auto& [prio, xds] : levels) {
    if (!out.empty()) {
      out += ' ';
    }
    out += "p" + std::to_string(prio) + ":" + std::to_string(xds);
  }
  return out;
}

std::string Join(const google::protobuf::RepeatedPtrField<std::string>& items) {
  std::string out;
  for (const std::string& s : items) {
    out += (out.empty() ? "" : " ") + s;
  }
  return out.empty() ? "-" : out;
}

double Throughput(const v1::TransferInfo& t) {
  return t.elapsed_s() > 0 ? static_cast<double>(t.bytes()) / t.elapsed_s() : 0;
}

}  // namespace

std::string OwnerText(const v1::SessionOwner& o) {
  std::string out = o.client_name().empty() ? std::string("?") : ForLog(o.client_name(), 64);
  out += " (session " + std::to_string(o.session_id());
  out += o.uid() >= 0 ? ", uid " + std::to_string(o.uid()) : std::string(", gRPC");
  if (o.pid() >= 0) {
    out += ", pid " + std::to_string(o.pid());
  }
  return out + ")";
}

namespace {

// -o wide's watches: one row each, with every field of WatchInfo.
std::string WatchTable(const v1::StatusResponse& s) {
  Table t({{"WATCHED", Align::kRight},
           {"SESSION", Align::kRight},
           {"REGIONS", Align::kRight},
           {"LOG", Align::kRight},
           {"PUBLISHED", Align::kRight},
           {"ACKNOWLEDGED", Align::kRight},
           {"ENTRIES", Align::kRight},
           {"PENDING", Align::kRight},
           {"FULL"}});
  for (const v1::WatchInfo& w : s.watches()) {
    t.AddRow({std::to_string(w.allocation()), std::to_string(w.owner_session()),
              std::to_string(w.regions_size()), FormatBytes(w.log_bytes()),
              std::to_string(w.log_published()), std::to_string(w.log_acknowledged()),
              std::to_string(w.entries()), std::to_string(w.pending_copies()), w.full()});
  }
  return t.empty() ? std::string() : "\n" + t.Render();
}

}  // namespace

std::string RenderWatches(const v1::StatusResponse& s) {
  const std::string table = WatchTable(s);
  return table.empty() ? table : table.substr(1);
}

namespace {

std::string StatusText(const v1::StatusResponse& s, bool wide) {
  const auto n = [](uint64_t v) { return std::to_string(v); };
  std::vector<std::pair<std::string, std::string>> watches;
  for (const v1::WatchInfo& w : s.watches()) {
    if (wide) break;  // a table of their own below
    watches.emplace_back("  allocation " + n(w.allocation()),
                         "session " + n(w.owner_session()) + ", " + n(w.regions_size()) +
                             " region(s), log " + FormatBytes(w.log_bytes()) + " (" + w.full() +
                             "), " + n(w.entries()) + " entries, " +
                             n(w.log_published() - w.log_acknowledged()) + " B unacknowledged");
  }
  std::string out = RenderFields({
      {"version", s.version()},
      {"node", n(s.node())},
      {"uptime", FormatDuration(s.uptime_s())},
      {"sessions", n(s.sessions())},
      {"transfers active", n(s.transfers_active())},
      {"transfers submitted", n(s.transfers_submitted())},
      {"transfers completed", n(s.transfers_completed())},
      {"transfers failed", n(s.transfers_failed())},
      {"transfers cancelled", n(s.transfers_cancelled())},
      {"program cache", n(s.program_cache_hits()) + " hits, " + n(s.program_cache_misses()) +
                            " misses, " + FormatBytes(s.program_cache_bytes()) + " held"},
      {"plan cache", n(s.plan_cache_hits()) + " hits, " + n(s.plan_cache_misses()) + " misses (" +
                         n(s.plans_simple()) + " simple, " + n(s.plans_full()) + " full plans)"},
      {"datatype programs", n(s.form_cache_hits()) + " hits, " + n(s.form_cache_misses()) +
                                " misses, " + n(s.form_cache_entries()) + " kept, " +
                                FormatBytes(s.form_cache_bytes()) + " held"},
      {"datatypes", n(s.datatypes()) + " registered; " + n(s.datatype_translations()) +
                        " translated, " + n(s.datatype_translations_memoized()) +
                        " by handle without translating"},
      {"forms to peers", n(s.forms_sent()) + " sent, " + n(s.forms_referred()) + " by hash only, " +
                             n(s.forms_resent()) + " sent again"},
      {"forms from peers", n(s.forms_received()) + " received; memo " + n(s.form_memo_hits()) +
                               " hits, " + n(s.form_memo_misses()) + " misses, " +
                               FormatBytes(s.form_memo_bytes()) + " held"},
      {"own hops", n(s.own_hop_windows()) + " window(s); " + n(s.own_hop_runs()) +
                       " run by clients, " + n(s.own_hop_fallbacks()) + " left to CMA, " +
                       n(s.own_hop_not_lent()) + " buffer(s) not in a window, " +
                       n(s.own_hop_timeouts()) + " timed out, " + n(s.own_hop_bogus()) +
                       " bogus answer(s)"},
      {"direct reads", n(s.direct_read_leases()) + " lease(s) granted, " +
                           n(s.direct_read_revoked()) + " revoked, " + n(s.direct_read_refused()) +
                           " refused"},
      {"allocations", n(s.allocations())},
      {"instances", n(s.instances())},
      {"watched (active access)",
       n(s.watched_allocations()) + " allocation(s), " + n(s.watched_regions()) + " region(s)"},
      {"rdma", s.rdma().empty() ? std::string("(not reported by this daemon)") : s.rdma()},
  });
  if (wide) {
    return out + WatchTable(s);
  }
  return watches.empty() ? out : out + RenderFields(watches);
}

}  // namespace

std::string RenderStatus(const v1::StatusResponse& s) { return StatusText(s, false); }
std::string RenderStatusWide(const v1::StatusResponse& s) { return StatusText(s, true); }

std::string RenderStatusLine(const v1::StatusResponse& s) {
  return "isometryd " + s.version() + ", node " + std::to_string(s.node()) + ", up " +
         FormatDuration(s.uptime_s()) + "; " + std::to_string(s.sessions()) + " session(s); " +
         "transfers: " + std::to_string(s.transfers_active()) + " active, " +
         std::to_string(s.transfers_completed()) + " done, " +
         std::to_string(s.transfers_failed()) + " failed, " +
         std::to_string(s.transfers_cancelled()) + " cancelled\n";
}

namespace {

// The table shows every field of Memory; -o wide adds what an operator
// computes from them: the pool's use in percent and what is left.
std::string Memories(const v1::ListMemoriesResponse& r, bool wide) {
  std::vector<Table::Column> columns = {{"MEMORY"},
                                        {"KIND"},
                                        {"ID"},
                                        {"POOL", Align::kRight},
                                        {"USED", Align::kRight},
                                        {"QUOTA/CLIENT", Align::kRight},
                                        {"STAGING", Align::kRight},
                                        {"STAGED", Align::kRight},
                                        {"PEAK", Align::kRight}};
  if (wide) {
    columns.insert(columns.end(), {{"USE%", Align::kRight}, {"FREE", Align::kRight}});
  }
  Table t(std::move(columns));
  for (const v1::Memory& m : r.memories()) {
    const bool pool = m.pool_capacity() > 0;
    std::vector<std::string> row = {
        m.name(),
        m.kind(),
        std::to_string(m.id().node()) + ":" + std::to_string(m.id().memory()),
        pool ? FormatBytes(m.pool_capacity()) : "-",
        pool ? FormatBytes(m.pool_used()) : "-",
        pool ? FormatBytes(m.client_quota()) : "-",
        FormatBytes(m.staging_budget()),
        FormatBytes(m.staging_used()),
        FormatBytes(m.staging_peak())};
    if (wide) {
      const uint64_t free = m.pool_capacity() - std::min(m.pool_used(), m.pool_capacity());
      row.insert(row.end(), {pool ? FormatPercent(m.pool_used(), m.pool_capacity()) : "-",
                             pool ? FormatBytes(free) : "-"});
    }
    t.AddRow(std::move(row));
  }
  if (t.empty()) {
    return "no memories\n";
  }
  return t.Render();
}

}  // namespace

std::string RenderMemories(const v1::ListMemoriesResponse& r) { return Memories(r, false); }
std::string RenderMemoriesWide(const v1::ListMemoriesResponse& r) { return Memories(r, true); }

namespace {

// -o wide adds the peer's memories, data address, resumes and network hops
// (the last as a column instead of lines below the table).
std::string Peers(const v1::ListPeersResponse& r, bool wide) {
  if (r.peers().empty()) {
    return "node '" + r.node_name() + "' has no peers (a single node)\n";
  }
  std::vector<Table::Column> columns = {{"PEER"},
                                        {"ADDRESS"},
                                        {"STATE"},
                                        {"NODE", Align::kRight},
                                        {"RTT", Align::kRight},
                                        {"DATA OUT/IN", Align::kRight},
                                        {"LINK"},
                                        {"SENT", Align::kRight},
                                        {"RECEIVED", Align::kRight},
                                        {"FROM"},
                                        {"LAST ERROR"}};
  if (wide) {
    columns.insert(
        columns.end(),
        {{"MEMORIES", Align::kRight}, {"DATA ADDRESS"}, {"RESUMES", Align::kRight}, {"NETWORK"}});
  }
  Table t(std::move(columns));
  const auto dash = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  for (const v1::PeerInfo& p : r.peers()) {
    char rtt[32];
    std::snprintf(rtt, sizeof rtt, "%.2f ms", p.rtt_ms());
    // A discovered peer's name and a peer's errors come from other nodes:
    // escaped like every string isoctl did not make.
    std::vector<std::string> row = {
        ForLog(p.name(), 96),
        p.address(),
        p.state(),
        p.state() == "up" ? std::to_string(p.node()) : "-",
        p.state() == "up" ? rtt : "-",
        std::to_string(p.data_out()) + "/" + std::to_string(p.data_in()),
        dash(p.data_link()),
        FormatBytes(p.bytes_sent()),
        FormatBytes(p.bytes_received()),
        p.source().empty() ? "config" : p.source(),
        dash(ForLog(p.last_error(), 160))};
    if (wide) {
      row.insert(row.end(), {std::to_string(p.memories()), dash(p.data_address()),
                             std::to_string(p.resumes()), dash(p.network())});
    }
    t.AddRow(std::move(row));
  }
  std::string network;
  for (const v1::PeerInfo& p : r.peers()) {
    if (!wide && !p.network().empty()) {
      network += "network hops with " + ForLog(p.name(), 96) + ": " + p.network() + "\n";
    }
  }
  return "node '" + r.node_name() + "'\n" + t.Render() + network;
}

}  // namespace

std::string RenderPeers(const v1::ListPeersResponse& r) { return Peers(r, false); }
std::string RenderPeersWide(const v1::ListPeersResponse& r) { return Peers(r, true); }

namespace {

// -o wide adds the worker threads and the limits (as a column instead of
// lines below the table).
std::string Channels(const v1::ListChannelsResponse& r, bool wide) {
  std::vector<Table::Column> columns = {{"CHANNEL"},
                                        {"KIND"},
                                        {"IN-FLIGHT", Align::kRight},
                                        {"QUEUED(prio:xds)"},
                                        {"REQUESTS", Align::kRight},
                                        {"MOVED", Align::kRight},
                                        {"CURRENT", Align::kRight},
                                        {"PEAK", Align::kRight},
                                        {"CAP", Align::kRight},
                                        {"EDGES"}};
  if (wide) {
    columns.insert(columns.end(), {{"THREADS", Align::kRight}, {"LIMITS"}});
  }
  Table t(std::move(columns));
  for (const v1::ChannelInfo& c : r.channels()) {
    // A network channel: credits bound it (its limits, below the table).
    const std::string bound =
        c.max_in_flight() > 0 ? std::to_string(c.max_in_flight()) : std::string("credits");
    std::vector<std::string> row = {
        c.name(),
        c.kind(),
        std::to_string(c.requests_in_flight()) + "/" + bound,
        Queued(c),
        std::to_string(c.requests_done()),
        FormatBytes(c.bytes_done()),
        FormatRate(c.current_bytes_per_s()),
        FormatRate(c.peak_bytes_per_s()),
        c.rate_limit_bytes_per_s() ? FormatRate(static_cast<double>(c.rate_limit_bytes_per_s()))
                                   : "none",
        Join(c.edges())};
    if (wide) {
      row.insert(row.end(), {std::to_string(c.threads()), c.limits().empty() ? "-" : c.limits()});
    }
    t.AddRow(std::move(row));
  }
  if (t.empty()) {
    return "no channels\n";
  }
  std::string out = t.Render();
  for (const v1::ChannelInfo& c : r.channels()) {
    if (!wide && !c.limits().empty()) out += c.name() + ": " + c.limits() + "\n";
  }
  return out;
}

}  // namespace

std::string RenderChannels(const v1::ListChannelsResponse& r) { return Channels(r, false); }
std::string RenderChannelsWide(const v1::ListChannelsResponse& r) { return Channels(r, true); }

namespace {

std::string RateOrDash(double bps) { return bps > 0 ? FormatRate(bps) : std::string("-"); }

// "CODE: message", escaped (it may quote what a client sent); "-" if none.
std::string ErrorText(const v1::TransferInfo& x) {
  return x.code() != 0 ? CodeName(x.code()) + ": " + ForLog(x.message(), 160) : "-";
}

// -o wide adds, on a transfer's first line, its path, the planner's
// predicted rate, the measured one and the error.
std::string Transfers(const v1::ListTransfersResponse& r, bool wide) {
  std::vector<Table::Column> columns = {{"ID", Align::kRight},
                                        {"STATE"},
                                        {"PRIO", Align::kRight},
                                        {"SIZE", Align::kRight},
                                        {"ELAPSED", Align::kRight},
                                        {"OWNER"},
                                        {"HOP", Align::kRight},
                                        {"CHANNEL"},
                                        {"FROM->TO"},
                                        {"LAYOUTS"},
                                        {"CHUNKS", Align::kRight},
                                        {"DONE", Align::kRight}};
  constexpr size_t kHopColumns = 6;
  if (wide) {
    columns.insert(
        columns.end(),
        {{"PATH"}, {"PREDICTED", Align::kRight}, {"MEASURED", Align::kRight}, {"ERROR"}});
  }
  Table t(std::move(columns));
  for (const v1::TransferInfo& x : r.transfers()) {
    const std::vector<std::string> extra = {x.path().empty() ? "-" : ForLog(x.path(), 160),
                                            RateOrDash(x.predicted_bytes_per_s()),
                                            RateOrDash(x.measured_bytes_per_s()), ErrorText(x)};
    std::vector<std::string> head = {
        std::to_string(x.id()),
        x.state(),
        std::to_string(x.priority()),
        FormatBytes(x.bytes()),
        FormatDuration(x.elapsed_s()),
        x.remote_half().empty() ? OwnerText(x.owner()) : ForLog(x.remote_half(), 96)};
    if (x.hops().empty()) {
      if (wide) {
        head.resize(head.size() + kHopColumns);
        head.insert(head.end(), extra.begin(), extra.end());
      }
      t.AddRow(head);
      continue;
    }
    for (int h = 0; h < x.hops_size(); ++h) {
      const v1::HopProgress& hop = x.hops(h);
      std::vector<std::string> row = h == 0 ? head : std::vector<std::string>(head.size());
      row.insert(row.end(),
                 {std::to_string(h), hop.channel(), hop.src_memory() + "->" + hop.dst_memory(),
                  hop.src_layout() + " -> " + hop.dst_layout(),
                  std::to_string(hop.chunks_done()) + "/" + std::to_string(hop.chunks_total()),
                  FormatPercent(hop.chunks_done(), hop.chunks_total())});
      if (wide && h == 0) {
        row.insert(row.end(), extra.begin(), extra.end());
      }
      t.AddRow(std::move(row));
    }
  }
  if (t.empty()) {
    return "no transfers in flight\n";
  }
  return t.Render();
}

// -o wide adds the priority and the owner (or the remote half's origin).
std::string RecentTransfers(const v1::ListTransfersResponse& r, bool wide) {
  std::vector<Table::Column> columns = {
      {"ID", Align::kRight},       {"STATE"}, {"BYTES", Align::kRight},
      {"DURATION", Align::kRight}, {"PATH"},  {"PREDICTED", Align::kRight},
      {"MEASURED", Align::kRight}, {"ERROR"}};
  if (wide) {
    columns.insert(columns.end(), {{"PRIO", Align::kRight}, {"OWNER"}});
  }
  Table t(std::move(columns));
  for (const v1::TransferInfo& x : r.transfers()) {
    std::vector<std::string> row = {std::to_string(x.id()),
                                    x.state(),
                                    FormatBytes(x.bytes()),
                                    FormatDuration(x.elapsed_s()),
                                    x.path().empty() ? "-" : ForLog(x.path(), 160),
                                    RateOrDash(x.predicted_bytes_per_s()),
                                    RateOrDash(x.measured_bytes_per_s()),
                                    ErrorText(x)};
    if (wide) {
      row.insert(row.end(), {std::to_string(x.priority()), !x.remote_half().empty()
                                                               ? ForLog(x.remote_half(), 96)
                                                           : x.has_owner() ? OwnerText(x.owner())
                                                                           : std::string("-")});
    }
    t.AddRow(std::move(row));
  }
  if (t.empty()) {
    return "no ended transfers (the daemon keeps the last daemon.transfer_history)\n";
  }
  return t.Render();
}

}  // namespace

std::string RenderTransfers(const v1::ListTransfersResponse& r) { return Transfers(r, false); }
std::string RenderTransfersWide(const v1::ListTransfersResponse& r) { return Transfers(r, true); }
std::string RenderRecentTransfers(const v1::ListTransfersResponse& r) {
  return RecentTransfers(r, false);
}
std::string RenderRecentTransfersWide(const v1::ListTransfersResponse& r) {
  return RecentTransfers(r, true);
}

namespace {

// "throughput: predicted 7.50 GB/s, measured 6.10 GB/s (0.81x)": the
// planner's model held against the copy's bytes over its wall time.
std::string PredictionLine(const v1::TransferInfo& x) {
  const double p = x.predicted_bytes_per_s(), m = x.measured_bytes_per_s();
  if (p <= 0 && m <= 0) {
    return "";
  }
  std::string out = "throughput: predicted " + (p > 0 ? FormatRate(p) : std::string("-"));
  if (m > 0) {
    out += ", measured " + FormatRate(m);
    if (p > 0) {
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, " (%.2fx)", m / p);
      out += ratio;
    }
  }
  return out + "\n";
}

}  // namespace

std::string RenderTransferWide(const v1::TransferInfo& x) {
  // The one field the summary leaves out, after its first line.
  std::string out = RenderTransfer(x);
  const std::string line = "priority: " + std::to_string(x.priority()) + "\n";
  return out.insert(out.find('\n') + 1, line);
}

std::string RenderTransfer(const v1::TransferInfo& x) {
  std::string out = "transfer " + std::to_string(x.id()) + ": " + x.state();
  if (x.state() == "done") {
    out += ", " + FormatBytes(x.bytes()) + " in " + FormatDuration(x.elapsed_s()) + " = " +
           FormatRate(Throughput(x));
  } else if (x.code() != 0) {
    out += " after " + FormatDuration(x.elapsed_s()) + ": " + CodeName(x.code()) + ": " +
           ForLog(x.message(), 512);
  } else {
    out += ", " + FormatBytes(x.bytes()) + ", " + FormatDuration(x.elapsed_s()) + " so far";
  }
  out += "\n";
  out += PredictionLine(x);
  if (!x.remote_half().empty()) {
    out += ForLog(x.remote_half(), 96) + "\n";
  } else if (x.has_owner()) {
    out += "owner: " + OwnerText(x.owner()) + "\n";
  }
  if (!x.path().empty()) {
    out += "path: " + ForLog(x.path(), 512) + "\n";
  }
  if (x.hops().empty()) {
    return out;
  }
  Table t({{"HOP", Align::kRight},
           {"CHANNEL"},
           {"FROM->TO"},
           {"LAYOUTS"},
           {"CHUNKS", Align::kRight},
           {"DONE", Align::kRight}});
  for (int h = 0; h < x.hops_size(); ++h) {
    const v1::HopProgress& hop = x.hops(h);
    t.AddRow({std::to_string(h), hop.channel(), hop.src_memory() + "->" + hop.dst_memory(),
              hop.src_layout() + " -> " + hop.dst_layout(),
              std::to_string(hop.chunks_done()) + "/" + std::to_string(hop.chunks_total()),
              FormatPercent(hop.chunks_done(), hop.chunks_total())});
  }
  return out + t.Render();
}

std::string RenderPlan(const v1::ExplainPlanResponse& p) {
  std::string out = "algorithm: " + p.algorithm() + "\n";
  if (!p.text().empty()) {
    out += "path: " + p.text() + "\n";
  }
  if (p.predicted_bytes_per_s() > 0) {
    out += "predicted: " + FormatRate(p.predicted_bytes_per_s()) + "\n";
  }
  // One line: its "; " also appears inside datatype texts, so it is not
  // a safe place to break.
  if (!p.why().empty()) {
    out += "why: " + p.why() + "\n";
  }
  out += "chunks: " + std::to_string(p.chunks()) + " of " + FormatBytes(p.chunk_bytes()) + "\n";
  Table t({{"HOP", Align::kRight},
           {"CHANNEL"},
           {"FROM->TO"},
           {"SRC-LAYOUT"},
           {"DST-LAYOUT"},
           {"REQUEST", Align::kRight},
           {"RUN", Align::kRight},
           {"PREDICTED", Align::kRight},
           {"BUFFER", Align::kRight}});
  for (int h = 0; h < p.hops_size(); ++h) {
    const v1::PlanHop& hop = p.hops(h);
    t.AddRow({std::to_string(h), hop.channel(), hop.src_memory() + "->" + hop.dst_memory(),
              hop.src_layout(), hop.dst_layout(), FormatBytes(hop.request_bytes()),
              hop.run_bytes() ? FormatBytes(hop.run_bytes()) : "-",
              hop.predicted_bytes_per_s() > 0 ? FormatRate(hop.predicted_bytes_per_s()) : "-",
              hop.buffer_bytes() ? FormatBytes(hop.buffer_bytes()) : "-"});
  }
  return out + t.Render() + RenderAlternatives(p);
}

std::string RenderCalibration(const v1::CalibrateResponse& r) {
  std::string out;
  for (const v1::ChannelCalibration& c : r.channels()) {
    out += "channel " + c.channel() + "\n";
    Table t({{"SIZE", Align::kRight}, {"THROUGHPUT", Align::kRight}});
    for (const v1::RateSample& s : c.samples()) {
      t.AddRow({FormatBytes(s.request_bytes()), FormatRate(s.bytes_per_s())});
    }
    out += t.Render();
  }
  return out;
}

}  // namespace isometry::isoctl
