// Benchmark output: a table for people and, with --json, one JSON object per
// line: {"scenario","metric","value","unit","baseline","baseline_value","ratio"}.
#pragma once

#include <cstdio>
#include <string>
#include <utility>
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

// One measurement and its baseline, round by round (both taken in the same
// round, back to back). The table shows medians: on a shared virtio disk fio
// alone moves 1.1-3.1 GB/s between runs, so the median of paired ratios is
// the figure that survives the noise; every round is printed to stderr.
class Rounds {
 public:
  struct Median {
    double ours = 0, base = 0, ratio = 0;  // GB/s, GB/s, median of ours/base
    int rounds = 0;
  };
  void Add(double ours, double base) {
    if (ours > 0 && base > 0) {
      pairs_.push_back({ours, base});
    }
  }
  Median Medians() const;
  // "  <what> per round (GB/s, ours/baseline=ratio): ...; median ratio R" on
  // stderr.
  void Print(const char* what) const;

 private:
  std::vector<std::pair<double, double>> pairs_;
};

// A table row from the medians of `r` (GB/s): "<baseline>, median of N
// rounds".
Row MedianRow(const char* scenario, const char* metric, const Rounds& r, const std::string& base,
              const char* target);

}  // namespace isometry::bench
