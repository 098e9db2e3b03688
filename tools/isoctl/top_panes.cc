#include "tools/isoctl/top_panes.h"

#include <algorithm>
#include <cstdio>

#include "tools/isoctl/format.h"
#include "tools/isoctl/top_layout.h"

namespace isometry::isoctl::top {

namespace {

constexpr Align kR = Align::kRight;

Cell BytesCell(uint64_t bytes) {
  return NumberCell(FormatBytes(bytes), static_cast<double>(bytes));
}
Cell RateCell(double bps) { return NumberCell(bps > 0 ? FormatRate(bps) : "-", bps); }
Cell CountCell(uint64_t n) { return NumberCell(std::to_string(n), static_cast<double>(n)); }

// "p5:3 p0:12", highest priority first, as `isoctl channels`; sorts by the
// XDs waiting at all priorities.
Cell QueuedCell(const ChannelRow& c) {
  std::vector<std::pair<int, int>> levels;
  int total = 0;
  for (const auto& [prio, xds] : c.queued) {
    if (xds > 0) {
      levels.emplace_back(prio, xds);
      total += xds;
    }
  }
  std::sort(levels.begin(), levels.end(), [](auto a, auto b) { return a.first > b.first; });
  std::string text;
  for (const auto& [prio, xds] : levels) {
    text += (text.empty() ? "p" : " p") + std::to_string(prio) + ":" + std::to_string(xds);
  }
  return NumberCell(text.empty() ? "-" : text, total);
}

std::string JoinedEdges(const std::vector<std::string>& edges) {
  std::string out;
  for (const std::string& e : edges) {
    out += (out.empty() ? "" : " ") + e;
  }
  return out.empty() ? "-" : out;
}

}  // namespace

PaneTable ChannelsTable(const Snapshot& snapshot, const UtilisationHistory& history,
                        Glyphs glyphs) {
  PaneTable t;
  t.columns = {{"CHANNEL"},
               {"KIND", Align::kLeft, false, 0, 3},
               {"IN-FLIGHT", kR},
               {"QUEUED", Align::kLeft, true, 10, 0},
               {"CURRENT", kR},
               {"UTIL"},
               {"PEAK", kR, false, 0, 4},
               {"CAP", kR, false, 0, 5},
               {"MOVED", kR, false, 0, 2},
               {"REQUESTS", kR, false, 0, 6},
               {"EDGES", Align::kLeft, true, 10, 1}};
  t.empty_text = "no channels";
  uint64_t index = 0;
  for (const ChannelRow& c : snapshot.channels) {
    // A network channel: credits bound it, not a request count.
    const std::string bound = c.max_in_flight > 0 ? std::to_string(c.max_in_flight) : "credits";
    const std::vector<double> samples = history.Samples(c.name);
    const double util = samples.empty() ? Utilisation(c) : samples.back();
    t.rows.push_back(
        {index++,
         {TextCell(c.name), TextCell(c.kind),
          NumberCell(std::to_string(c.in_flight) + "/" + bound, c.in_flight), QueuedCell(c),
          RateCell(c.current_bps), NumberCell(Sparkline(samples, kSparkColumns, glyphs), util),
          RateCell(c.peak_bps),
          c.rate_limit_bps ? RateCell(static_cast<double>(c.rate_limit_bps))
                           : NumberCell("none", 0),
          BytesCell(c.bytes_done), CountCell(c.requests_done), TextCell(JoinedEdges(c.edges))}});
  }
  return t;
}

PaneTable TransfersTable(const Snapshot& snapshot) {
  PaneTable t;
  t.columns = {{"ID", kR},
               {"STATE"},
               {"PRIO", kR, false, 0, 4},
               {"SIZE", kR, false, 0, 2},
               {"DONE", kR},
               {"RATE", kR},
               {"PREDICTED", kR},
               {"ELAPSED", kR, false, 0, 3},
               {"PATH", Align::kLeft, true, 20, 1},
               {"OWNER", Align::kLeft, true, 8, 5}};
  t.empty_text = "no transfers in flight";
  for (const TransferRow& x : snapshot.transfers) {
    const double done = Progress(x);
    t.rows.push_back(
        {x.id,
         {CountCell(x.id), TextCell(x.state), NumberCell(std::to_string(x.priority), x.priority),
          BytesCell(x.bytes),
          NumberCell(x.hops.empty() ? "-" : FormatPercent(static_cast<uint64_t>(done * 1000), 1000),
                     done),
          RateCell(RateSoFar(x)), RateCell(x.predicted_bps),
          NumberCell(FormatDuration(x.elapsed_s), x.elapsed_s),
          TextCell(x.path.empty() ? "-" : x.path), TextCell(x.owner)}});
  }
  return t;
}

PaneTable PeersTable(const Snapshot& snapshot) {
  PaneTable t;
  t.columns = {{"PEER"},
               {"STATE"},
               {"ADDRESS", Align::kLeft, true, 10, 4},
               {"RTT", kR},
               {"DATA", kR, false, 0, 3},
               {"LINK", Align::kLeft, true, 6, 2},
               {"SENT", kR, false, 0, 5},
               {"RECEIVED", kR, false, 0, 5},
               {"NETWORK", Align::kLeft, true, 8, 6},
               {"ERROR", Align::kLeft, true, 8, 1}};
  t.empty_text = "node '" + snapshot.node_name + "' has no peers (a single node)";
  uint64_t index = 0;
  for (const PeerRow& p : snapshot.peers) {
    const bool up = p.state == "up";
    char rtt[32];
    std::snprintf(rtt, sizeof rtt, "%.2f ms", p.rtt_ms);
    t.rows.push_back({index++,
                      {TextCell(p.name), TextCell(p.state), TextCell(p.address),
                       NumberCell(up ? rtt : "-", up ? p.rtt_ms : 0),
                       NumberCell(std::to_string(p.data_out) + "/" + std::to_string(p.data_in),
                                  p.data_out + p.data_in),
                       TextCell(p.data_link.empty() ? "-" : p.data_link), BytesCell(p.bytes_sent),
                       BytesCell(p.bytes_received), TextCell(p.network.empty() ? "-" : p.network),
                       TextCell(p.last_error.empty() ? "-" : p.last_error)}});
  }
  return t;
}

PaneTable MemoriesTable(const Snapshot& snapshot) {
  PaneTable t;
  t.columns = {{"MEMORY"},
               {"KIND", Align::kLeft, false, 0, 1},
               {"POOL", kR},
               {"USED", kR},
               {"USE%", kR},
               {"QUOTA/CLIENT", kR, false, 0, 2},
               {"STAGING", kR},
               {"STAGED", kR},
               {"PEAK", kR, false, 0, 3}};
  t.empty_text = "no memories";
  uint64_t index = 0;
  for (const MemoryRow& m : snapshot.memories) {
    const bool pool = m.pool_capacity > 0;
    const double use =
        pool ? static_cast<double>(m.pool_used) / static_cast<double>(m.pool_capacity) : 0;
    t.rows.push_back(
        {index++,
         {TextCell(m.name), TextCell(m.kind),
          pool ? BytesCell(m.pool_capacity) : NumberCell("-", 0),
          pool ? BytesCell(m.pool_used) : NumberCell("-", 0),
          NumberCell(pool ? FormatPercent(m.pool_used, m.pool_capacity) : "-", use),
          pool ? BytesCell(m.client_quota) : NumberCell("-", 0), BytesCell(m.staging_budget),
          BytesCell(m.staging_used), BytesCell(m.staging_peak)}});
  }
  return t;
}

PaneTable PaneTableOf(Pane pane, const Snapshot& snapshot, const UtilisationHistory& history,
                      Glyphs glyphs) {
  switch (pane) {
    case Pane::kChannels:
      return ChannelsTable(snapshot, history, glyphs);
    case Pane::kTransfers:
      return TransfersTable(snapshot);
    case Pane::kPeers:
      return PeersTable(snapshot);
    case Pane::kMemories:
      return MemoriesTable(snapshot);
  }
  return {};
}

std::vector<std::string> TransferDetail(const TransferRow& x, int width) {
  std::vector<std::string> lines;
  const auto add = [&](const std::string& line) { lines.push_back(Elide(line, width)); };
  add("transfer " + std::to_string(x.id) + ": " + x.state + ", " + FormatBytes(x.bytes) + ", " +
      (x.hops.empty() ? std::string("-")
                      : FormatPercent(static_cast<uint64_t>(Progress(x) * 1000), 1000)) +
      " after " + FormatDuration(x.elapsed_s) + ", priority " + std::to_string(x.priority));
  if (!x.owner.empty()) {
    add("owner: " + x.owner);
  }
  add("path: " + (x.path.empty() ? std::string("-") : x.path));
  std::string rates = "rate: predicted " +
                      (x.predicted_bps > 0 ? FormatRate(x.predicted_bps) : "-") + ", " +
                      (x.measured_bps > 0 ? "measured " : "so far ") +
                      (RateSoFar(x) > 0 ? FormatRate(RateSoFar(x)) : "-");
  if (x.predicted_bps > 0 && RateSoFar(x) > 0) {
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, " (%.2fx)", RateSoFar(x) / x.predicted_bps);
    rates += ratio;
  }
  add(rates);
  lines.emplace_back();
  if (x.hops.empty()) {
    add("no hops yet (not planned)");
    return lines;
  }
  const std::vector<Column> columns = {{"HOP", kR},
                                       {"CHANNEL"},
                                       {"FROM->TO", Align::kLeft, true, 8, 0},
                                       {"LAYOUTS", Align::kLeft, true, 8, 1},
                                       {"CHUNKS", kR},
                                       {"DONE", kR}};
  std::vector<Row> rows;
  for (size_t h = 0; h < x.hops.size(); ++h) {
    const HopRow& hop = x.hops[h];
    rows.push_back(
        {h,
         {TextCell(std::to_string(h)), TextCell(hop.channel),
          TextCell(hop.src_memory + "->" + hop.dst_memory),
          TextCell(hop.src_layout + " -> " + hop.dst_layout),
          TextCell(std::to_string(hop.chunks_done) + "/" + std::to_string(hop.chunks_total)),
          TextCell(FormatPercent(hop.chunks_done, hop.chunks_total))}});
  }
  std::vector<std::string> headers;
  headers.reserve(columns.size());
  for (const Column& c : columns) {
    headers.push_back(c.header);
  }
  const std::vector<int> widths = FitColumns(columns, headers, rows, width);
  add(FormatLine(columns, headers, widths));
  for (const Row& r : rows) {
    std::vector<std::string> cells;
    for (const Cell& c : r.cells) {
      cells.push_back(c.text);
    }
    add(FormatLine(columns, cells, widths));
  }
  return lines;
}

}  // namespace isometry::isoctl::top
