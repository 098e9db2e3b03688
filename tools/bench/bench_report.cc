#include "tools/bench/bench_report.h"

#include <algorithm>
#include <cmath>

namespace isometry::bench {

namespace {

// JSON string escaping for the few characters our names could contain.
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  return out + "\"";
}

std::string Number(double v) {
  if (!std::isfinite(v)) {
    return "null";
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string Array(const std::vector<double>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    out += (i ? "," : "") + Number(v[i]);
  }
  return out + "]";
}

std::string Array(const Percentiles& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    out += (i ? ",[" : "[") + Number(v[i].first) + "," + Number(v[i].second) + "]";
  }
  return out + "]";
}

// Measured over predicted, or 0 when the row has no comparable prediction.
double PredictedRatio(const Row& r) {
  return r.predicted.gbps > 0 && r.unit == "GB/s" ? r.value / r.predicted.gbps : 0;
}

bool WithinTolerance(double ratio) {
  return ratio >= 1 - kPredictionTolerance && ratio <= 1 + kPredictionTolerance;
}

std::string Json(const Row& row, const std::string& machine) {
  std::string out = "{\"scenario\":" + Quote(row.scenario) + ",\"metric\":" + Quote(row.metric) +
                    ",\"value\":" + Number(row.value) + ",\"unit\":" + Quote(row.unit) +
                    ",\"baseline\":" + Quote(row.baseline) +
                    ",\"baseline_value\":" + Number(row.baseline_value) +
                    ",\"ratio\":" + Number(row.ratio) + ",\"target\":" + Quote(row.target) +
                    ",\"machine\":" + machine;
  if (row.rounds > 0) {
    std::vector<double> ratios;
    ratios.reserve(row.round_values.size());
    for (size_t i = 0; i < row.round_values.size(); ++i) {
      ratios.push_back(row.round_values[i] / row.round_baselines[i]);
    }
    out +=
        ",\"rounds\":" + std::to_string(row.rounds) + ",\"ratio_min\":" + Number(row.ratio_min) +
        ",\"ratio_max\":" + Number(row.ratio_max) + ",\"round_values\":" + Array(row.round_values) +
        ",\"round_baselines\":" + Array(row.round_baselines) + ",\"round_ratios\":" + Array(ratios);
  }
  const double pr = PredictedRatio(row);
  if (pr > 0) {
    out += ",\"predicted\":" + Number(row.predicted.gbps) + ",\"predicted_ratio\":" + Number(pr) +
           ",\"predicted_ok\":" + (WithinTolerance(pr) ? "true" : "false");
  } else {
    out += ",\"predicted\":null,\"plan\":" + Quote(row.predicted.note);
  }
  if (row.bytes > 0) {
    out += ",\"bytes\":" + std::to_string(row.bytes);
  }
  if (!row.percentiles.empty()) {
    out += ",\"percentiles\":" + Array(row.percentiles);
  }
  if (!row.baseline_percentiles.empty()) {
    out += ",\"baseline_percentiles\":" + Array(row.baseline_percentiles);
  }
  return out + "}";
}

}  // namespace

double MedianOf(std::vector<double> v) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  const size_t m = v.size();
  return m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
}

double PercentileOf(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) {
    return 0;
  }
  return sorted[static_cast<size_t>(p * static_cast<double>(sorted.size() - 1))];
}

Percentiles PercentilesOf(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  Percentiles out;
  if (samples.empty()) {
    return out;
  }
  out.reserve(105);
  for (int p = 0; p < 100; ++p) {
    out.emplace_back(p, PercentileOf(samples, p / 100.0));
  }
  for (double p : {99.5, 99.9, 99.99, 100.0}) {
    out.emplace_back(p, PercentileOf(samples, p / 100));
  }
  return out;
}

Rounds::Median Rounds::Medians() const {
  std::vector<double> ours, base, ratio;
  ours.reserve(pairs_.size());
  base.reserve(pairs_.size());
  ratio.reserve(pairs_.size());
  for (const auto& [o, b] : pairs_) {
    ours.push_back(o);
    base.push_back(b);
    ratio.push_back(o / b);
  }
  Median m{MedianOf(ours), MedianOf(base), MedianOf(ratio), 0, 0, static_cast<int>(pairs_.size())};
  if (!ratio.empty()) {
    m.ratio_min = *std::min_element(ratio.begin(), ratio.end());
    m.ratio_max = *std::max_element(ratio.begin(), ratio.end());
  }
  return m;
}

void Rounds::Print(const char* what) const {
  if (pairs_.empty()) {
    return;
  }
  std::string line;
  for (const auto& [ours, base] : pairs_) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " %.3g/%.3g=%.2f", ours, base, ours / base);
    line += buf;
  }
  std::fprintf(stderr, "  %s per round (ours/baseline=ratio):%s; median ratio %.3f\n", what,
               line.c_str(), Medians().ratio);
}

Row MedianRow(const char* scenario, const char* metric, const Rounds& r, const std::string& base,
              const char* target, const char* unit) {
  const Rounds::Median m = r.Medians();
  Row row{scenario, metric, m.ours, unit, base, m.base, m.ratio, target};
  row.rounds = m.rounds;
  row.ratio_min = m.ratio_min;
  row.ratio_max = m.ratio_max;
  for (const auto& [ours, baseline] : r.pairs()) {
    row.round_values.push_back(ours);
    row.round_baselines.push_back(baseline);
  }
  return row;
}

void Report::Add(Row row) {
  if (json_) {
    std::printf("%s\n", Json(row, MachineJson(machine_)).c_str());
    std::fflush(stdout);
  } else {
    std::fprintf(stderr, "  done: %s / %s\n", row.scenario.c_str(), row.metric.c_str());
  }
  rows_.push_back(std::move(row));
}

void Report::Finish() const {
  if (json_) {
    return;
  }
  std::printf("\n%s\n", MachineLine(machine_).c_str());
  std::printf("%-22s %-20s %10s %-5s %-34s %10s %6s %-11s %3s %9s %-9s %s\n", "scenario", "metric",
              "value", "unit", "baseline", "baseline", "ratio", "range", "n", "predicted",
              "meas/pred", "target");
  bool outside = false;
  for (const Row& r : rows_) {
    char range[32] = "-", rounds[16] = "-", predicted[32] = "no plan", vs[32] = "-";
    if (r.rounds > 0) {
      std::snprintf(range, sizeof range, "%.3g-%.3g", r.ratio_min, r.ratio_max);
      std::snprintf(rounds, sizeof rounds, "%d", r.rounds);
    }
    if (const double pr = PredictedRatio(r); pr > 0) {
      std::snprintf(predicted, sizeof predicted, "%.3f", r.predicted.gbps);
      std::snprintf(vs, sizeof vs, "%.2f%s", pr, WithinTolerance(pr) ? "" : " !");
      outside = outside || !WithinTolerance(pr);
    }
    std::printf("%-22s %-20s %10.3f %-5s %-34s %10.3f %6.3f %-11s %3s %9s %-9s %s\n",
                r.scenario.c_str(), r.metric.c_str(), r.value, r.unit.c_str(), r.baseline.c_str(),
                r.baseline_value, r.ratio, range, rounds, predicted, vs, r.target.c_str());
  }
  std::printf(
      "\nratio: median over paired rounds of ours/baseline (range: min-max of the rounds); "
      "predicted: the plan's throughput (GB/s)%s\n",
      outside ? "; !: measured is more than 25 % off the prediction" : "");
}

}  // namespace isometry::bench
