// The data behind `isoctl top`'s full-screen view, and what the keys do to
// it: one snapshot of the daemon as plain rows (no protobuf, no terminal),
// each channel's utilisation over the last refreshes, and the view state
// (pane, sort column, order, filter, selected transfer, pause).
//
// Pure and single-threaded: the screen loop (top_screen.h) owns one View
// and one UtilisationHistory and feeds them snapshots and keys, so all of
// this is tested without a terminal or a daemon.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace isometry::isoctl::top {

struct ChannelRow {
  std::string name, kind;
  int in_flight = 0;
  int max_in_flight = 0;                    // 0: bounded by credits (a network channel)
  std::vector<std::pair<int, int>> queued;  // (priority, XDs waiting), as the daemon lists them
  uint64_t requests_done = 0, bytes_done = 0;
  double current_bps = 0, peak_bps = 0;
  uint64_t rate_limit_bps = 0;  // 0: no cap
  std::vector<std::string> edges;
};

struct HopRow {
  std::string channel, src_memory, dst_memory, src_layout, dst_layout;
  uint64_t chunks_done = 0, chunks_total = 0;
};

struct TransferRow {
  uint64_t id = 0;
  std::string state;
  int priority = 0;
  uint64_t bytes = 0;
  double elapsed_s = 0;
  std::string path;
  std::string owner;  // already escaped for the terminal
  double predicted_bps = 0, measured_bps = 0;
  std::vector<HopRow> hops;
};

struct PeerRow {
  std::string name, address, state;
  double rtt_ms = 0;
  unsigned data_out = 0, data_in = 0;
  std::string data_link, network, last_error;
  uint64_t bytes_sent = 0, bytes_received = 0;
};

struct MemoryRow {
  std::string name, kind;
  uint64_t pool_capacity = 0, pool_used = 0, client_quota = 0;
  uint64_t staging_budget = 0, staging_used = 0, staging_peak = 0;
};

struct Snapshot {
  std::string status_line;  // RenderStatusLine's text, without its newline
  std::string node_name;
  std::vector<ChannelRow> channels;
  std::vector<TransferRow> transfers;
  std::vector<PeerRow> peers;
  std::vector<MemoryRow> memories;
};

// Fraction of a transfer delivered, 0..1: its last hop's chunks (what has
// reached the destination); 0 before the plan has hops.
double Progress(const TransferRow& t);
// The transfer's rate so far: the measured rate once it has ended "done",
// before that the bytes delivered over the time since submission.
double RateSoFar(const TransferRow& t);
// How busy a channel is, 0..1: its current rate against its cap, or,
// uncapped, against the best one-second window it has shown (the peak),
// since a channel's possible rate is known only from what it has done.
double Utilisation(const ChannelRow& c);

// Each channel's utilisation at the last `capacity` refreshes, oldest
// first. A channel missing from a snapshot loses its history.
class UtilisationHistory {
 public:
  explicit UtilisationHistory(size_t capacity) : capacity_(capacity) {}
  void Record(const std::vector<ChannelRow>& channels);
  // Empty for a channel never recorded.
  std::vector<double> Samples(const std::string& channel) const;

 private:
  size_t capacity_;
  std::map<std::string, std::deque<double>> samples_;
};

enum class Glyphs { kAscii, kUnicode };
// The last `width` samples (each clamped to 0..1) as one glyph each, eight
// levels from a baseline ("_" / U+2581) for 0 to a full block ("#" /
// U+2588) for 1; left-padded with spaces when fewer samples are known.
// Always `width` display columns.
std::string Sparkline(const std::vector<double>& samples, size_t width, Glyphs glyphs);

// ---- tables ----

enum class Align { kLeft, kRight };

struct Column {
  std::string header;
  Align align = Align::kLeft;
  // Where the screen is too narrow: an elastic column (a path, a list) is
  // cut down first, to min_width at most; then whole columns go, the
  // highest drop_rank first (0: never dropped).
  bool elastic = false;
  int min_width = 0;
  int drop_rank = 0;
};

// One cell: its text, and the value it sorts by (numbers by value, text
// by text).
struct Cell {
  std::string text;
  double number = 0;
  bool numeric = false;
};
Cell TextCell(std::string text);
Cell NumberCell(std::string text, double value);

struct Row {
  uint64_t id = 0;  // the transfer's id in the transfers pane; else the row's index
  std::vector<Cell> cells;
};

struct PaneTable {
  std::vector<Column> columns;
  std::vector<Row> rows;
  std::string empty_text;  // what the pane says when there are no rows at all
};

// ---- view state ----

enum class Pane { kChannels = 0, kTransfers = 1, kPeers = 2, kMemories = 3 };
inline constexpr int kPaneCount = 4;
const char* PaneTitle(Pane pane);

struct PaneState {
  int sort_column = -1;  // -1: the daemon's order
  bool descending = false;
  std::string filter;  // case-insensitive substring of any cell; "" shows all
};

// The rows of `table` that match the pane's filter, sorted by its column
// (stable: equal keys keep the daemon's order), descending when asked.
std::vector<Row> Arrange(const PaneTable& table, const PaneState& state);
// `header` with the pane's sort mark: "RATE v" (descending) or "RATE ^".
std::string SortedHeader(const PaneTable& table, const PaneState& state, int column);

class View {
 public:
  Pane pane() const { return pane_; }
  void SetPane(Pane pane) { pane_ = pane; }
  void NextPane() { pane_ = static_cast<Pane>((static_cast<int>(pane_) + 1) % kPaneCount); }
  PaneState& state() { return states_[static_cast<int>(pane_)]; }
  const PaneState& state() const { return states_[static_cast<int>(pane_)]; }
  const PaneState& state(Pane pane) const { return states_[static_cast<int>(pane)]; }
  // The next sort column of `table`, wrapping to the daemon's order after
  // the last. A fresh column sorts numbers (right-aligned columns) largest
  // first, what an operator looks for, and text A to Z.
  void CycleSort(const PaneTable& table);
  void Reverse() { state().descending = !state().descending; }

  // The selected transfer, kept by id so that a re-sort or a refresh does
  // not move the selection to another transfer; 0 when none.
  uint64_t selected() const { return selected_; }
  // Moves the selection `delta` rows within `visible` (the transfers pane's
  // arranged rows), or selects the first row when the selected transfer
  // is not among them.
  void MoveSelection(const std::vector<Row>& visible, int delta);
  // After a refresh: keeps the selection if still visible, else selects the
  // row that took its place (same index, or the last row); 0 when none.
  void KeepSelection(const std::vector<Row>& visible);

  bool paused = false;
  bool help = false;
  bool hops = false;  // showing the selected transfer's hops

 private:
  Pane pane_ = Pane::kChannels;
  PaneState states_[kPaneCount];
  uint64_t selected_ = 0;
  size_t selected_index_ = 0;  // where it was, for KeepSelection
};

}  // namespace isometry::isoctl::top
