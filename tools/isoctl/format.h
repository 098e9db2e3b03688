// Human output of isoctl: units and aligned tables. Pure string functions,
// no protobuf and no I/O, so they are trivially testable.
//
// Units: sizes are binary (KiB, MiB, GiB), rates decimal (MB/s, GB/s), as
// memory and link datasheets quote them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace isometry::isoctl {

// "0 B", "512 B", "8.00 MiB", "1.50 GiB".
std::string FormatBytes(uint64_t bytes);
// "0 B/s", "812.4 MB/s", "3.21 GB/s".
std::string FormatRate(double bytes_per_s);
// Short durations: "850 us", "2.10 ms", "1.25 s", "3m 05s", "1h 02m 03s".
std::string FormatDuration(double seconds);
// "12.5%" of done / total; "-" when total is 0.
std::string FormatPercent(uint64_t done, uint64_t total);

// A table with a header row and columns separated by two spaces; each
// column is as wide as its widest cell. Every cell is made printable ASCII
// (ForTerminal, core/log_escape.h), so a string another user chose (a
// client name, a message) can neither drive the operator's terminal nor
// forge a row, whatever column it lands in.
class Table {
 public:
  enum class Align { kLeft, kRight };
  struct Column {
    std::string header;
    Align align = Align::kLeft;
  };

  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

  // A row with fewer cells than columns is padded with empty cells.
  void AddRow(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }
  // The header and every row, each line ending in '\n', no trailing blanks.
  std::string Render() const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// "key   value" lines with the values aligned, made printable as a
// table's cells are.
std::string RenderFields(const std::vector<std::pair<std::string, std::string>>& fields);

}  // namespace isometry::isoctl
