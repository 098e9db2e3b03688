#include "tools/isoctl/top_model.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace {

using namespace isometry::isoctl::top;

PaneTable Sample() {
  PaneTable t;
  t.columns = {{"NAME"}, {"RATE", Align::kRight}};
  t.rows = {{0, {TextCell("memcpy0"), NumberCell("2.00 GB/s", 2e9)}},
            {1, {TextCell("disk0"), NumberCell("900.0 MB/s", 9e8)}},
            {2, {TextCell("tcp:b"), NumberCell("12.00 GB/s", 12e9)}},
            {3, {TextCell("cma0"), NumberCell("900.0 MB/s", 9e8)}}};
  return t;
}

std::vector<uint64_t> Ids(const std::vector<Row>& rows) {
  std::vector<uint64_t> ids;
  ids.reserve(rows.size());
  for (const Row& r : rows) {
    ids.push_back(r.id);
  }
  return ids;
}

TEST_CASE("Arrange keeps the daemon's order until a column is chosen") {
  CHECK(Ids(Arrange(Sample(), PaneState{})) == std::vector<uint64_t>{0, 1, 2, 3});
}

TEST_CASE("Arrange sorts numbers by value, not by their text") {
  // As text, "12.00 GB/s" < "2.00 GB/s" < "900.0 MB/s".
  const PaneState ascending{.sort_column = 1};
  CHECK(Ids(Arrange(Sample(), ascending)) == std::vector<uint64_t>{1, 3, 0, 2});
  // Equal keys keep the daemon's order both ways (1 before 3).
  const PaneState descending{.sort_column = 1, .descending = true};
  CHECK(Ids(Arrange(Sample(), descending)) == std::vector<uint64_t>{2, 0, 1, 3});
}

TEST_CASE("Arrange sorts text A to Z") {
  CHECK(Ids(Arrange(Sample(), PaneState{.sort_column = 0})) == std::vector<uint64_t>{3, 1, 0, 2});
}

TEST_CASE("The filter keeps rows with a cell containing it, in any case") {
  CHECK(Ids(Arrange(Sample(), PaneState{.filter = "MB/s"})) == std::vector<uint64_t>{1, 3});
  CHECK(Ids(Arrange(Sample(), PaneState{.filter = "TCP"})) == std::vector<uint64_t>{2});
  CHECK(Arrange(Sample(), PaneState{.filter = "nothing"}).empty());
  // Filtered, then sorted.
  const PaneState both{.sort_column = 0, .filter = "c"};
  CHECK(Ids(Arrange(Sample(), both)) == std::vector<uint64_t>{3, 0, 2});
}

TEST_CASE("s cycles the sort column, numbers largest first, then back to none") {
  View view;
  const PaneTable t = Sample();
  CHECK(SortedHeader(t, view.state(), 0) == "NAME");
  view.CycleSort(t);
  CHECK(view.state().sort_column == 0);
  CHECK_FALSE(view.state().descending);
  CHECK(SortedHeader(t, view.state(), 0) == "NAME ^");
  view.CycleSort(t);
  CHECK(view.state().sort_column == 1);
  CHECK(view.state().descending);
  CHECK(SortedHeader(t, view.state(), 1) == "RATE v");
  CHECK(SortedHeader(t, view.state(), 0) == "NAME");
  view.Reverse();
  CHECK(SortedHeader(t, view.state(), 1) == "RATE ^");
  view.CycleSort(t);
  CHECK(view.state().sort_column == -1);
}

TEST_CASE("Each pane keeps its own sort and filter") {
  View view;
  view.state().filter = "x";
  view.NextPane();
  CHECK(view.pane() == Pane::kTransfers);
  CHECK(view.state().filter.empty());
  view.SetPane(Pane::kMemories);
  view.NextPane();
  CHECK(view.pane() == Pane::kChannels);
  CHECK(view.state().filter == "x");
  CHECK(std::string(PaneTitle(Pane::kPeers)) == "Peers");
}

TEST_CASE("The selection follows the transfer, not the row") {
  View view;
  std::vector<Row> rows = {{7, {}}, {8, {}}, {9, {}}};
  view.MoveSelection(rows, 0);
  CHECK(view.selected() == 7);
  view.MoveSelection(rows, 1);
  CHECK(view.selected() == 8);
  view.MoveSelection(rows, 5);  // clamped to the last
  CHECK(view.selected() == 9);
  view.MoveSelection(rows, -1);
  CHECK(view.selected() == 8);
  // Re-sorted: 8 is still selected, wherever it went.
  rows = {{9, {}}, {8, {}}, {7, {}}};
  view.KeepSelection(rows);
  CHECK(view.selected() == 8);
  // 8 ended: the row that took its place is selected.
  rows = {{9, {}}, {7, {}}};
  view.KeepSelection(rows);
  CHECK(view.selected() == 7);
  view.KeepSelection({});
  CHECK(view.selected() == 0);
}

TEST_CASE("Progress is the last hop's, and the rate so far follows it") {
  TransferRow t{.id = 1, .bytes = 1000, .elapsed_s = 2};
  CHECK(Progress(t) == 0);
  CHECK(RateSoFar(t) == 0);
  t.hops = {{.chunks_done = 4, .chunks_total = 4}, {.chunks_done = 1, .chunks_total = 4}};
  CHECK(Progress(t) == 0.25);
  CHECK(RateSoFar(t) == 125);
  t.measured_bps = 480;  // ended "done": the daemon's measure
  CHECK(RateSoFar(t) == 480);
}

TEST_CASE("Utilisation is against the cap, else the peak") {
  CHECK(Utilisation(ChannelRow{}) == 0);
  CHECK(Utilisation(ChannelRow{.current_bps = 50, .peak_bps = 200}) == 0.25);
  CHECK(Utilisation(ChannelRow{.current_bps = 50, .peak_bps = 200, .rate_limit_bps = 100}) == 0.5);
  CHECK(Utilisation(ChannelRow{.current_bps = 500, .peak_bps = 200, .rate_limit_bps = 100}) == 1);
}

TEST_CASE("The history keeps the last N samples and forgets channels that went") {
  UtilisationHistory history(3);
  for (double v : {0.0, 0.25, 0.5, 1.0}) {
    history.Record({ChannelRow{.name = "a", .current_bps = v, .peak_bps = 1}});
  }
  CHECK(history.Samples("a") == std::vector<double>{0.25, 0.5, 1.0});
  CHECK(history.Samples("b").empty());
  history.Record({ChannelRow{.name = "b"}});
  CHECK(history.Samples("a").empty());
  CHECK(history.Samples("b") == std::vector<double>{0.0});
}

TEST_CASE("A sparkline is exactly its width, newest sample on the right") {
  CHECK(Sparkline({}, 4, Glyphs::kAscii) == "    ");
  CHECK(Sparkline({0, 1}, 4, Glyphs::kAscii) == "  _#");
  // A trickle is one step above the baseline; values are clamped to 0..1.
  CHECK(Sparkline({0.01, 0.5, 2, -1}, 4, Glyphs::kAscii) == ".=#_");
  // Only the last `width` samples show.
  CHECK(Sparkline({1, 1, 0, 0}, 2, Glyphs::kAscii) == "__");
  CHECK(Sparkline({0, 1}, 3, Glyphs::kUnicode) == " \u2581\u2588");
}

}  // namespace
