// Benchmark output: a table for people and, with --json, one JSON object per
// line: {"scenario","metric","value","unit","baseline","baseline_value","ratio"}.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace isometry::bench {

struct Row {
  std::string scenario;
  std::string metric;
  double value = 0;
  std::string unit;
  std::string baseline;
  double baseline_value = 0;
  // value / baseline_value for throughputs; baseline / value for times is
  // the caller's choice: it passes the ratio where "higher is better".
  double ratio = 0;
  std::string target;  // e.g. ">= 0.95", shown in the table only
};

class Report {
 public:
  explicit Report(bool json) : json_(json) {}
  void Add(Row row);
  // Prints the table (always to stdout when not --json).
  void Finish() const;

 private:
  bool json_;
  std::vector<Row> rows_;
};

}  // namespace isometry::bench
