// Benchmark output: a table for people and, with --json, one JSON object per
// line: {"scenario","metric","value","unit","baseline","baseline_value",
// "ratio","machine"} (machine.h: where the row was measured) and, where the row has them, the
// paired rounds ("rounds", "ratio_min", "ratio_max", "round_values", "round_baselines",
// "round_ratios"), the plan's prediction ("predicted", "predicted_ratio",
// "predicted_ok", "plan"), the size measured ("bytes") and a latency
// distribution ("percentiles", "baseline_percentiles": [[p, value], ...]).
// tools/bench/plot.py reads that form.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "tools/bench/machine.h"

namespace isometry::bench {

// (percentile in 0..100, value) pairs of a sample set.
using Percentiles = std::vector<std::pair<double, double>>;

// The plan's throughput for a measured copy, in GB/s; gbps == 0 when there
// is no plan, and `note` says why (e.g. "no plan: channel-level").
struct Prediction {
  double gbps = 0;
  std::string note = "no plan";
};

// Measured over predicted within this factor either way (the issue's
// target: +-25 %); rows outside it are marked in the table and JSON.
constexpr double kPredictionTolerance = 0.25;

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

  // Paired rounds (MedianRow fills these): how many, the range of the
  // per-round ratios, and each round's pair.
  int rounds = 0;
  double ratio_min = 0, ratio_max = 0;
  std::vector<double> round_values, round_baselines;

  Prediction predicted;  // in GB/s; compared with `value` when unit is GB/s
  uint64_t bytes = 0;    // the size moved per copy, when the row has one
  Percentiles percentiles, baseline_percentiles;  // latency rows: all samples
};

class Report {
 public:
  // Measures the machine first (machine.h): every row carries it.
  explicit Report(bool json) : json_(json), machine_(MeasureMachine()) {}
  const Machine& machine() const { return machine_; }
  void Add(Row row);
  // Prints the table (always to stdout when not --json).
  void Finish() const;

 private:
  bool json_;
  Machine machine_;
  std::vector<Row> rows_;
};

// One measurement and its baseline, round by round (both taken in the same
// round, back to back). The table shows medians: on a shared host fio and
// memcpy alone swing widely between runs (docs/benchmarks/design-measurements.md,
// "Benchmark method"), so the median of paired ratios is the figure that
// survives the noise, and their range says how much noise there was; every
// round is printed to stderr. Works for any unit: the ratio is ours/base.
class Rounds {
 public:
  struct Median {
    double ours = 0, base = 0, ratio = 0;  // medians; ratio: of ours/base
    double ratio_min = 0, ratio_max = 0;   // range of the per-round ratios
    int rounds = 0;
  };
  void Add(double ours, double base) {
    if (ours > 0 && base > 0) {
      pairs_.push_back({ours, base});
    }
  }
  Median Medians() const;
  const std::vector<std::pair<double, double>>& pairs() const { return pairs_; }
  // "  <what> per round (ours/baseline=ratio): ...; median ratio R" on
  // stderr.
  void Print(const char* what) const;

 private:
  std::vector<std::pair<double, double>> pairs_;
};

// A table row from the medians of `r`, with the range and every round.
Row MedianRow(const char* scenario, const char* metric, const Rounds& r, const std::string& base,
              const char* target, const char* unit = "GB/s");

// The median of `v` (0 when empty).
double MedianOf(std::vector<double> v);
// The value at fraction `p` (0..1) of the sorted samples (nearest rank).
double PercentileOf(const std::vector<double>& sorted, double p);
// Percentiles 0, 1, ..., 99, 99.5, 99.9, 99.99, 100 of `samples`: enough
// for a CDF without printing every sample.
Percentiles PercentilesOf(std::vector<double> samples);

}  // namespace isometry::bench
