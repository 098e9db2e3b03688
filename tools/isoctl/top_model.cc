#include "tools/isoctl/top_model.h"

#include <algorithm>
#include <cctype>

namespace isometry::isoctl::top {

double Progress(const TransferRow& t) {
  if (t.hops.empty() || t.hops.back().chunks_total == 0) {
    return 0;
  }
  const HopRow& last = t.hops.back();
  return std::min(1.0,
                  static_cast<double>(last.chunks_done) / static_cast<double>(last.chunks_total));
}

double RateSoFar(const TransferRow& t) {
  if (t.measured_bps > 0) {
    return t.measured_bps;
  }
  return t.elapsed_s > 0 ? static_cast<double>(t.bytes) * Progress(t) / t.elapsed_s : 0;
}

double Utilisation(const ChannelRow& c) {
  const double bound = c.rate_limit_bps > 0 ? static_cast<double>(c.rate_limit_bps) : c.peak_bps;
  if (bound <= 0 || c.current_bps <= 0) {
    return 0;
  }
  return std::clamp(c.current_bps / bound, 0.0, 1.0);
}

void UtilisationHistory::Record(const std::vector<ChannelRow>& channels) {
  std::map<std::string, std::deque<double>> next;
  for (const ChannelRow& c : channels) {
    std::deque<double>& samples = next[c.name];
    if (auto it = samples_.find(c.name); it != samples_.end()) {
      samples = std::move(it->second);
    }
    samples.push_back(Utilisation(c));
    while (samples.size() > capacity_) {
      samples.pop_front();
    }
  }
  samples_ = std::move(next);
}

std::vector<double> UtilisationHistory::Samples(const std::string& channel) const {
  const auto it = samples_.find(channel);
  if (it == samples_.end()) {
    return {};
  }
  return {it->second.begin(), it->second.end()};
}

std::string Sparkline(const std::vector<double>& samples, size_t width, Glyphs glyphs) {
  static constexpr const char* kBlocks[] = {"\u2581", "\u2582", "\u2583", "\u2584",
                                            "\u2585", "\u2586", "\u2587", "\u2588"};
  static constexpr char kAsciiRamp[] = "_.-~=+*#";
  const size_t shown = std::min(width, samples.size());
  std::string out(width - shown, ' ');
  for (size_t i = samples.size() - shown; i < samples.size(); ++i) {
    const double v = std::clamp(samples[i], 0.0, 1.0);
    // 0 is the baseline, anything above it at least one step up, so a
    // trickle shows.
    const int level = v <= 0 ? 0 : std::clamp(1 + static_cast<int>(v * 7), 1, 7);
    if (glyphs == Glyphs::kUnicode) {
      out += kBlocks[level];
    } else {
      out += kAsciiRamp[level];
    }
  }
  return out;
}

Cell TextCell(std::string text) { return Cell{.text = std::move(text)}; }

Cell NumberCell(std::string text, double value) {
  return Cell{.text = std::move(text), .number = value, .numeric = true};
}

const char* PaneTitle(Pane pane) {
  switch (pane) {
    case Pane::kChannels:
      return "Channels";
    case Pane::kTransfers:
      return "Transfers";
    case Pane::kPeers:
      return "Peers";
    case Pane::kMemories:
      return "Memories";
  }
  return "?";
}

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool RowMatches(const Row& row, const std::string& lowered_filter) {
  if (lowered_filter.empty()) {
    return true;
  }
  return std::any_of(row.cells.begin(), row.cells.end(), [&](const Cell& c) {
    return Lower(c.text).find(lowered_filter) != std::string::npos;
  });
}

// Orders two cells of one column: numbers by value, text by text; a cell
// missing from a short row sorts first.
bool CellLess(const Row& a, const Row& b, size_t column) {
  const bool has_a = column < a.cells.size(), has_b = column < b.cells.size();
  if (!has_a || !has_b) {
    return !has_a && has_b;
  }
  const Cell& x = a.cells[column];
  const Cell& y = b.cells[column];
  if (x.numeric && y.numeric) {
    return x.number < y.number;
  }
  return x.text < y.text;
}

}  // namespace

std::vector<Row> Arrange(const PaneTable& table, const PaneState& state) {
  const std::string filter = Lower(state.filter);
  std::vector<Row> rows;
  for (const Row& r : table.rows) {
    if (RowMatches(r, filter)) {
      rows.push_back(r);
    }
  }
  if (state.sort_column >= 0 && static_cast<size_t>(state.sort_column) < table.columns.size()) {
    const auto column = static_cast<size_t>(state.sort_column);
    // Descending keeps equal keys in the daemon's order too (not a reversal).
    std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
      return state.descending ? CellLess(b, a, column) : CellLess(a, b, column);
    });
  }
  return rows;
}

std::string SortedHeader(const PaneTable& table, const PaneState& state, int column) {
  const std::string& header = table.columns.at(static_cast<size_t>(column)).header;
  if (column != state.sort_column) {
    return header;
  }
  return header + (state.descending ? " v" : " ^");
}

void View::CycleSort(const PaneTable& table) {
  PaneState& s = state();
  const int columns = static_cast<int>(table.columns.size());
  s.sort_column = s.sort_column + 1 >= columns ? -1 : s.sort_column + 1;
  s.descending = s.sort_column >= 0 &&
                 table.columns[static_cast<size_t>(s.sort_column)].align == Align::kRight;
}

void View::MoveSelection(const std::vector<Row>& visible, int delta) {
  if (visible.empty()) {
    selected_ = 0;
    return;
  }
  const auto it =
      std::find_if(visible.begin(), visible.end(), [&](const Row& r) { return r.id == selected_; });
  if (it == visible.end()) {
    selected_index_ = 0;
  } else {
    const long index = (it - visible.begin()) + delta;
    selected_index_ =
        static_cast<size_t>(std::clamp<long>(index, 0, static_cast<long>(visible.size()) - 1));
  }
  selected_ = visible[selected_index_].id;
}

void View::KeepSelection(const std::vector<Row>& visible) {
  if (visible.empty()) {
    selected_ = 0;
    return;
  }
  const auto it =
      std::find_if(visible.begin(), visible.end(), [&](const Row& r) { return r.id == selected_; });
  if (it != visible.end()) {
    selected_index_ = static_cast<size_t>(it - visible.begin());
    return;
  }
  selected_index_ = std::min(selected_index_, visible.size() - 1);
  selected_ = visible[selected_index_].id;
}

}  // namespace isometry::isoctl::top
