#include "tools/isoctl/top_panes.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tools/isoctl/top_layout.h"

namespace {

using namespace isometry::isoctl::top;

// What a full screen draws of a table: header and rows fitted to `width`.
std::vector<std::string> Draw(const PaneTable& t, int width) {
  std::vector<std::string> headers;
  for (const Column& c : t.columns) {
    headers.push_back(c.header);
  }
  const std::vector<int> widths = FitColumns(t.columns, headers, t.rows, width);
  std::vector<std::string> lines = {FormatLine(t.columns, headers, widths)};
  for (const Row& r : t.rows) {
    std::vector<std::string> cells;
    for (const Cell& c : r.cells) {
      cells.push_back(c.text);
    }
    lines.push_back(FormatLine(t.columns, cells, widths));
  }
  return lines;
}

Snapshot Busy() {
  Snapshot s;
  ChannelRow memcpy{.name = "memcpy0",
                    .kind = "memcpy",
                    .in_flight = 3,
                    .max_in_flight = 64,
                    .queued = {{0, 12}, {5, 3}},
                    .current_bps = 4.19e6,
                    .peak_bps = 8e6,
                    .rate_limit_bps = 4 << 20};
  // The default config's edges: every memory to every other.
  for (int i = 0; i < 24; ++i) {
    memcpy.edges.push_back("sys" + std::to_string(i % 4) + "->reg" + std::to_string(i));
  }
  s.channels = {memcpy, ChannelRow{.name = "tcp:b", .kind = "tcp"}};
  TransferRow t{.id = 1099511627777,
                .state = "running",
                .priority = 5,
                .bytes = 32 << 20,
                .elapsed_s = 2.5,
                .path = "sys0<F,x> -[memcpy0]-> sys0<F,x> -[tcp:b]-> b:sys0<F,x>",
                .owner = "isoctl copy (session 3, uid 1000, pid 42)",
                .predicted_bps = 4.19e6};
  t.hops = {{.channel = "memcpy0",
             .src_memory = "sys0",
             .dst_memory = "sys0",
             .src_layout = "F,x",
             .dst_layout = "F,x",
             .chunks_done = 8,
             .chunks_total = 32}};
  s.transfers = {t};
  s.peers = {{.name = "b",
              .address = "10.0.0.2:7070",
              .state = "up",
              .rtt_ms = 0.25,
              .data_out = 4,
              .data_in = 4,
              .data_link = "TLS 1.3, kTLS",
              .network = "TCP",
              .bytes_sent = 1 << 30}};
  s.memories = {{.name = "sys0",
                 .kind = "SYS",
                 .pool_capacity = 256 << 20,
                 .pool_used = 64 << 20,
                 .client_quota = 128 << 20,
                 .staging_budget = 64 << 20}};
  return s;
}

TEST_CASE("Every pane fits 80 columns, and keeps what matters most") {
  UtilisationHistory history(60);
  history.Record(Busy().channels);
  for (int p = 0; p < kPaneCount; ++p) {
    const PaneTable t = PaneTableOf(static_cast<Pane>(p), Busy(), history, Glyphs::kUnicode);
    for (const std::string& line : Draw(t, 80)) {
      CHECK(DisplayWidth(line) <= 80);
    }
  }
  const std::vector<std::string> channels =
      Draw(ChannelsTable(Busy(), history, Glyphs::kAscii), 80);
  CHECK(channels[0].starts_with("CHANNEL"));
  CHECK(channels[0].find("IN-FLIGHT") != std::string::npos);
  CHECK(channels[0].find("UTIL") != std::string::npos);
  CHECK(channels[0].find("EDGES") != std::string::npos);  // cut, not gone
  CHECK(channels[1].find("3/64") != std::string::npos);
  CHECK(channels[1].find("p5:3 p0:12") != std::string::npos);
  CHECK(channels[2].find("0/credits") != std::string::npos);
  CHECK(channels[1].back() == '~');  // the edges, elided

  const std::vector<std::string> transfers = Draw(TransfersTable(Busy()), 80);
  for (const char* header : {"ID", "STATE", "DONE", "RATE", "PREDICTED", "PATH"}) {
    CHECK(transfers[0].find(header) != std::string::npos);
  }
  CHECK(transfers[1].find("1099511627777  running") != std::string::npos);
  CHECK(transfers[1].find("25.0%") != std::string::npos);
}

TEST_CASE("A wide terminal shows every column") {
  UtilisationHistory history(60);
  const std::vector<std::string> lines = Draw(ChannelsTable(Busy(), history, Glyphs::kAscii), 400);
  for (const char* header : {"KIND", "PEAK", "CAP", "MOVED", "REQUESTS"}) {
    CHECK(lines[0].find(header) != std::string::npos);
  }
  CHECK(lines[1].find("sys3->reg23") != std::string::npos);
}

TEST_CASE("The utilisation column sorts by the latest sample") {
  UtilisationHistory history(60);
  history.Record(Busy().channels);
  const PaneTable t = ChannelsTable(Busy(), history, Glyphs::kAscii);
  CHECK(t.columns[5].header == "UTIL");
  CHECK(t.rows[0].cells[5].number == Approx(4.19e6 / (4 << 20)));
  CHECK(DisplayWidth(t.rows[0].cells[5].text) == kSparkColumns);
  CHECK(t.rows[1].cells[5].number == 0);
}

TEST_CASE("The hops view lists each hop within the width") {
  const std::vector<std::string> lines = TransferDetail(Busy().transfers[0], 80);
  CHECK(lines[0] == "transfer 1099511627777: running, 32.00 MiB, 25.0% after 2.50 s, priority 5");
  CHECK(lines[1] == "owner: isoctl copy (session 3, uid 1000, pid 42)");
  CHECK(lines[2].starts_with("path: sys0<F,x> -[memcpy0]->"));
  CHECK(lines[3] == "rate: predicted 4.19 MB/s, so far 3.36 MB/s (0.80x)");
  CHECK(lines[5].starts_with("HOP  CHANNEL  FROM->TO"));
  CHECK(lines[6] == "  0  memcpy0  sys0->sys0  F,x -> F,x    8/32  25.0%");
  for (const std::string& line : TransferDetail(Busy().transfers[0], 30)) {
    CHECK(DisplayWidth(line) <= 30);
  }
}

TEST_CASE("Empty panes say so") {
  const Snapshot empty{.node_name = "a"};
  UtilisationHistory history(4);
  CHECK(TransfersTable(empty).empty_text == "no transfers in flight");
  CHECK(PeersTable(empty).empty_text == "node 'a' has no peers (a single node)");
  CHECK(ChannelsTable(empty, history, Glyphs::kAscii).rows.empty());
}

}  // namespace
