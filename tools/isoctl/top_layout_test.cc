#include "tools/isoctl/top_layout.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace {

using namespace isometry::isoctl::top;

TEST_CASE("Elide cuts to the width and marks the cut") {
  CHECK(Elide("memcpy0", 10) == "memcpy0");
  CHECK(Elide("memcpy0", 7) == "memcpy0");
  CHECK(Elide("memcpy0", 6) == "memcp~");
  CHECK(Elide("memcpy0", 1) == "~");
  CHECK(Elide("memcpy0", 0).empty());
  CHECK(Elide("memcpy0", -3).empty());
}

TEST_CASE("Widths count code points, so a sparkline's blocks are one column each") {
  const std::string blocks = "\u2581\u2582\u2583\u2584";
  CHECK(DisplayWidth(blocks) == 4);
  CHECK(Elide(blocks, 3) == "\u2581\u2582~");
  CHECK(Pad(blocks, 6) == blocks + "  ");
  CHECK(Pad("7", 3, Align::kRight) == "  7");
}

std::vector<Row> OneRow(std::vector<std::string> texts) {
  Row r;
  for (std::string& t : texts) {
    r.cells.push_back(TextCell(std::move(t)));
  }
  return {r};
}

TEST_CASE("Columns that fit keep their natural widths") {
  const std::vector<Column> columns = {{"A"}, {"BB", Align::kRight}, {"C", Align::kLeft, true, 3}};
  const std::vector<std::string> headers = {"A", "BB", "C"};
  const auto rows = OneRow({"xxxx", "1", "yy"});
  const std::vector<int> widths = FitColumns(columns, headers, rows, 80);
  CHECK(widths == std::vector<int>{4, 2, 2});
  CHECK(FormatLine(columns, headers, widths) == "A     BB  C");
  CHECK(FormatLine(columns, {"xxxx", "1", "yy"}, widths) == "xxxx   1  yy");
}

TEST_CASE("A long elastic column is cut before anything is dropped") {
  // EDGES as the default config has it: ~200 characters.
  std::string edges;
  for (int i = 0; i < 20; ++i) {
    edges += "sys0->reg" + std::to_string(i) + " ";
  }
  const std::vector<Column> columns = {
      {"CHANNEL"}, {"KIND", Align::kLeft, false, 0, 2}, {"EDGES", Align::kLeft, true, 10, 1}};
  const std::vector<std::string> headers = {"CHANNEL", "KIND", "EDGES"};
  const auto rows = OneRow({"memcpy0", "memcpy", edges});
  const std::vector<int> widths = FitColumns(columns, headers, rows, 80);
  CHECK(widths == std::vector<int>{7, 6, 80 - 7 - 6 - 2 * kColumnGap});
  const std::string line = FormatLine(columns, {"memcpy0", "memcpy", edges}, widths);
  CHECK(DisplayWidth(line) == 80);
  CHECK(line.back() == '~');
}

TEST_CASE("When cutting is not enough, the highest drop rank goes first") {
  const std::vector<Column> columns = {{"NAME"},
                                       {"LOW", Align::kLeft, false, 0, 1},
                                       {"HIGH", Align::kLeft, false, 0, 2},
                                       {"LIST", Align::kLeft, true, 6, 0}};
  const std::vector<std::string> headers = {"NAME", "LOW", "HIGH", "LIST"};
  const auto rows = OneRow({"n", "llllllllll", "hhhhhhhhhh", std::string(40, 'x')});
  // 4 + 10 + 10 + 6 at the least, with gaps 36: HIGH goes at 35.
  CHECK(FitColumns(columns, headers, rows, 36) == std::vector<int>{4, 10, 10, 6});
  CHECK(FitColumns(columns, headers, rows, 35) == std::vector<int>{4, 10, 0, 17});
  CHECK(FitColumns(columns, headers, rows, 20) == std::vector<int>{4, 0, 0, 14});
  // Nothing left to drop or cut: the line is as narrow as it can be.
  CHECK(FitColumns(columns, headers, rows, 5) == std::vector<int>{4, 0, 0, 6});
  const std::vector<int> widths = FitColumns(columns, headers, rows, 35);
  CHECK(FormatLine(columns, headers, widths) == "NAME  LOW         LIST");
}

TEST_CASE("The cut is shared among long elastic columns, the widest first") {
  const std::vector<Column> columns = {{"P", Align::kLeft, true, 4}, {"Q", Align::kLeft, true, 4}};
  const auto rows = OneRow({std::string(30, 'p'), std::string(10, 'q')});
  CHECK(FitColumns(columns, {"P", "Q"}, rows, 22) == std::vector<int>{10, 10});
  CHECK(FitColumns(columns, {"P", "Q"}, rows, 14) == std::vector<int>{6, 6});
}

}  // namespace
